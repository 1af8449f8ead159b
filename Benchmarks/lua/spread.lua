-- POST "increase" to a random instance among the ids listed (one a line) in the file $IDS.
local ids = {}
for line in io.lines(os.getenv("IDS")) do ids[#ids + 1] = line end
local headers = { ["Content-Type"] = "application/json" }

function init(args)
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16) % 100000)
end

function request()
  local id = ids[math.random(#ids)]
  return wrk.format("POST", "/reactors/" .. id .. "/actions", headers, '"increase"')
end
