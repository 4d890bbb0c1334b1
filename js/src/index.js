// @baton/langgraph-saver: LangGraph.js checkpoints in baton's fenced
// checkpoint store. See README.md.
export { BatonSaver, DEFAULTS, RESUME_METADATA_KEY, RUN_METADATA_KEY } from "./saver.js";
export { INPUT_ENV, RESUME_ENV, progress, runNode, waitRequest } from "./node.js";
export { BatonError, BatonFencedError, BatonLeaseLostError, EXIT_LEASE_LOST, isFenced } from "./errors.js";
export { leaseFromEnv, parseToken } from "./lease.js";
export { validateID, validateNS } from "./ids.js";
export { BatonStore } from "./store.js";
