// One redis-server and one batonctl build for every test file.
import { buildBatonctl, startRedis } from "./harness.js";

export default async function setup(project) {
  const ctl = buildBatonctl();
  let redis;
  try {
    redis = await startRedis();
  } catch (err) {
    ctl.cleanup();
    throw err;
  }
  project.provide("redisURL", redis.url);
  project.provide("batonctl", ctl.bin);
  return async () => {
    await redis.stop();
    ctl.cleanup();
  };
}
