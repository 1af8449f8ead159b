-- POST "increase" to the counters listed in a file (one id a line, the file named after `--`),
-- each in turn; every wrk thread starts at its own place in the list.
local requests = {}
local position = 0

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("place", threads)
end

function init(args)
  wrk.headers["Content-Type"] = "application/json"
  for line in io.lines(args[1]) do
    if #line > 0 then
      requests[#requests + 1] = wrk.format("POST", "/reactors/" .. line .. "/actions", wrk.headers, '"increase"')
    end
  end
  position = ((place or 1) * 37) % #requests
end

function request()
  position = position % #requests + 1
  return requests[position]
end
