// Validation of the names that become parts of Redis keys, as in
// fence/ids.go and fence/checkpoint.go. Checking before any key is built
// means no input can forge a hash tag or reach another key.
import { BatonError } from "./errors.js";

export const MAX_ID_LEN = 128;
export const MAX_NS_LEN = 256;

const ID_RE = /^[A-Za-z0-9._-]+$/;
const NS_RE = /^[A-Za-z0-9._\-:|]*$/;

/** Throws unless id matches fence.ValidateID: [A-Za-z0-9._-]{1,128}, not dots alone. */
export function validateID(field, id) {
  if (typeof id !== "string" || id === "") {
    throw new BatonError(`baton: ${field}: invalid id: ${id === "" ? "empty" : `want a string, got ${typeof id}`}`);
  }
  if (Buffer.byteLength(id) > MAX_ID_LEN) {
    throw new BatonError(`baton: ${field}: invalid id: ${Buffer.byteLength(id)} bytes, at most ${MAX_ID_LEN}`);
  }
  if (!ID_RE.test(id)) {
    throw new BatonError(`baton: ${field} ${JSON.stringify(id)}: invalid id (allowed: A-Z a-z 0-9 . _ -)`);
  }
  if (/^\.+$/.test(id)) {
    throw new BatonError(`baton: ${field} ${JSON.stringify(id)}: invalid id: only dots`);
  }
  return id;
}

/** Throws unless ns matches fence.ValidateNS: "" or [A-Za-z0-9._-:|]{1,256}. */
export function validateNS(ns) {
  if (typeof ns !== "string") {
    throw new BatonError(`baton: checkpoint_ns: want a string, got ${typeof ns}`);
  }
  if (Buffer.byteLength(ns) > MAX_NS_LEN) {
    throw new BatonError(`baton: checkpoint_ns: ${Buffer.byteLength(ns)} bytes, at most ${MAX_NS_LEN}`);
  }
  if (!NS_RE.test(ns)) {
    throw new BatonError(`baton: checkpoint_ns ${JSON.stringify(ns)}: invalid (allowed: A-Z a-z 0-9 . _ - : |)`);
  }
  return ns;
}
