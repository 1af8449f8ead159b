-- POST "increase" to the URL's path (/reactors/{id}/actions); the C baseline ignores the path.
wrk.method = "POST"
wrk.body = '"increase"'
wrk.headers["Content-Type"] = "application/json"
