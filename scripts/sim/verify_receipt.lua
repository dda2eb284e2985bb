-- wrk script: POST one minted receipt to verifyReceipt over and over.
-- The request body (JSON with "receipt-data") is read from the file named by RECEIPT_BODY_FILE.
-- Usage: RECEIPT_BODY_FILE=body.json wrk -t2 -c64 -d10s -s scripts/sim/verify_receipt.lua http://127.0.0.1:PORT/verifyReceipt
local path = os.getenv("RECEIPT_BODY_FILE")
if path == nil then
  error("set RECEIPT_BODY_FILE to a file holding the verifyReceipt JSON body")
end
local file = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"

-- Counters are globals of each thread's Lua state; done() runs in the main state and sums them with thread:get.
non200 = 0
not_status0 = 0
local threads = {}

setup = function(thread)
  table.insert(threads, thread)
end

response = function(status, headers, body)
  if status ~= 200 then
    non200 = non200 + 1
  elseif not string.find(body, '"status":0', 1, true) then
    not_status0 = not_status0 + 1
  end
end

done = function(summary, latency, requests)
  local bad_status, not_zero = 0, 0
  for _, thread in ipairs(threads) do
    bad_status = bad_status + thread:get("non200")
    not_zero = not_zero + thread:get("not_status0")
  end
  io.write(string.format("requests=%d non200=%d not_status0=%d errors=%d\n",
    summary.requests, bad_status, not_zero,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status
      + summary.errors.timeout))
  io.write(string.format("p50_us=%d p99_us=%d\n", latency:percentile(50), latency:percentile(99)))
end
