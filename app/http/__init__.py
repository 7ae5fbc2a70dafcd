"""L1: the REST/SSE surface. Routes parse, make one kernel call and shape the answer."""
