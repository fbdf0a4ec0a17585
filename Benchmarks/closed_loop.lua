-- reconcile-benchmark, part 7: wrk's script for the closed loop. Each of wrk's connections sends
-- its next request when the last is answered; every request carries a notification never sent
-- before, the next line of the file named by WRK_BODIES (one request body per line), read as it
-- goes rather than all at once. Run with one thread (-t 1), so that one file is shared by every
-- connection. wrk calls request() once before the run to check it: that line is never sent.
local file
local headers = { ["Content-Type"] = "application/json" }

function init(args)
  file = assert(io.open(os.getenv("WRK_BODIES"), "r"))
end

function request()
  -- Past the end of the file: a body that is not Apple's, answered 400, so counted as refused
  -- rather than a notification sent twice.
  return wrk.format("POST", nil, headers, file:read("*l") or "{}")
end

-- One line for the benchmark to read: wrk counts answers of 400 and above as status errors.
function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format("closed-loop answered=%d duration_us=%d status_errors=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration, errors.status, errors.connect, errors.read, errors.write, errors.timeout))
end
