wrk.method = "POST"
wrk.body = '{"type":"increase"}'
wrk.headers["Content-Type"] = "application/json"
