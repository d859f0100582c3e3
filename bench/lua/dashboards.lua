-- wrk script for fresh dashboards: `-- SHAPE` where SHAPE is `mix` or one shape's name.
-- Each request asks an aggregates question with a filter bound never asked before (a
-- counter of the thread's and the request's), so no remembered answer can give it.
local shapes = {
  -- The issue's dashboard: count and average price by city and type.
  city_type = '{"groupBy":["city","type"],"aggregates":{"n":{"fn":"count"},'
    .. '"avgPrice":{"fn":"avg","field":"price"}},"filter":"price=le=%d.%02d"}',
  status_availability = '{"groupBy":["status","availability"],"aggregates":{"n":{"fn":"count"},'
    .. '"total":{"fn":"sum","field":"price"}},"filter":"surface=gt=%d.%02d"}',
  project = '{"groupBy":["subProjectId"],"aggregates":{"low":{"fn":"min","field":"price"},'
    .. '"high":{"fn":"max","field":"price"},"area":{"fn":"avg","field":"surface"}},'
    .. '"filter":"price=ge=%d.%02d;city=in=(Cairo,Dubai,Riyadh)"}',
  bedrooms = '{"groupBy":["bedrooms"],"aggregates":{"n":{"fn":"count"},'
    .. '"area":{"fn":"sum","field":"surface"}},"filter":"price=lt=%d.%02d"}',
}
local order = {"city_type", "status_availability", "project", "bedrooms"}
local chosen, thread_seed, counter, headers = nil, 0, 0, nil

function setup(thread)
  thread_seed = thread_seed + 1
  thread:set("thread_seed", thread_seed)
end

function init(args)
  chosen = args[1] or "mix"
  headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = "application/json"
  math.randomseed(os.time() + thread_seed)
end

function request()
  counter = counter + 1
  local shape = chosen
  if shape == "mix" then shape = order[(counter % #order) + 1] end
  -- A price bound within the seeded prices (500 to 67 million), a surface bound within the
  -- surfaces (30 to 649 m2); the cents count the thread's requests.
  local whole = math.random(100000, 67000000)
  local cents = (thread_seed * 37 + counter) % 100
  if shape == "status_availability" then whole = math.random(30, 649) end
  local body = string.format(shapes[shape], whole, cents)
  return wrk.format("POST", "/api/v2/units/query", headers, body)
end
