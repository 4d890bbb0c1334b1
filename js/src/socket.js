// Holds a Node.js process open only while the saver waits for Redis.
//
// An ioredis connection is a socket, and a referenced socket keeps the
// event loop alive: a program whose main code has finished would never
// exit, and an exec node whose graph returned would never end. Here the
// socket is unreferenced whenever no command is in flight, and referenced
// while one is, so an `await` on a reply still keeps the process alive
// until the reply arrives.

/**
 * Makes redis hold the event loop only while a command is in flight.
 * Returns a function that undoes it (the client is then left referenced).
 * @param {import("ioredis").Redis} redis
 */
export function refOnlyWhileBusy(redis) {
  let busy = 0;
  const apply = () => {
    const s = redis.stream;
    if (!s || typeof s.ref !== "function") return;
    if (busy > 0) s.ref();
    else s.unref();
  };
  const own = Object.prototype.hasOwnProperty.call(redis, "sendCommand");
  const previous = redis.sendCommand;
  // Every command, pipelined and MULTI ones included, goes through
  // sendCommand; a command sent twice (the offline queue's flush) is
  // counted twice and settled twice.
  redis.sendCommand = function sendCommand(command, stream) {
    busy += 1;
    apply();
    const done = () => {
      busy -= 1;
      apply();
    };
    command?.promise?.then(done, done);
    return previous.call(this, command, stream);
  };
  // A new socket (the first connection, a reconnect) starts referenced.
  redis.on("connect", apply);
  redis.on("ready", apply);
  apply();
  return () => {
    if (own) redis.sendCommand = previous;
    else delete redis.sendCommand;
    redis.off("connect", apply);
    redis.off("ready", apply);
    redis.stream?.ref?.();
  };
}
