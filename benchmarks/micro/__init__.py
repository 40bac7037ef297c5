"""One component of the broker or the load tool in a loop, in process, no sockets: what a
message, a route, a rate check or a queue write costs the interpreter."""
