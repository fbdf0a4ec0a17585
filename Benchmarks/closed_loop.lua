-- reconcile-benchmark, part 7: wrk's script for the closed loop. Each of wrk's connections sends
-- its next request when the last is answered; every request carries a notification never sent
-- before, the lines of the file named by WRK_BODIES (one request body per line) in order. Run
-- with one thread (-t 1), so that one list is shared by every connection.
local bodies = {}
local sent = 0
local headers = { ["Content-Type"] = "application/json" }

function init(args)
  for line in io.lines(os.getenv("WRK_BODIES")) do
    bodies[#bodies + 1] = line
  end
end

function request()
  sent = sent + 1
  -- Past the end of the list: a body that is not Apple's, answered 400, so counted as refused
  -- rather than a notification sent twice.
  return wrk.format("POST", nil, headers, bodies[sent] or "{}")
end

-- One line for the benchmark to read: wrk counts answers of 400 and above as status errors.
function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format("closed-loop answered=%d duration_us=%d status_errors=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration, errors.status, errors.connect, errors.read, errors.write, errors.timeout))
end
