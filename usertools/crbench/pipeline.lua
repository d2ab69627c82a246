-- SPDX-License-Identifier: BSD-3-Clause
-- wrk script of cr-bench http, pipelined mode: every write carries DEPTH requests for
-- wrk's URL (DEPTH = the first script argument after "--", default 16). wrk counts each
-- response, so requests/s and the latency percentiles are per request.
local depth = 16

init = function(args)
   if args[1] ~= nil then
      depth = tonumber(args[1])
   end
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil, wrk.path)
   end
   req = table.concat(r)
end

request = function()
   return req
end
