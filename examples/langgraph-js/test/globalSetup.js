// One redis-server and one batonctl build for every test file.
import { buildBatonctl, startRedis } from "./harness.js";

export default async function setup(project) {
  const redis = await startRedis();
  const ctl = buildBatonctl();
  project.provide("redisURL", redis.url);
  project.provide("batonctl", ctl.bin);
  return async () => {
    await redis.stop();
    ctl.cleanup();
  };
}
