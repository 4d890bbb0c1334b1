// Starts LangGraph's reference Agent Server (@langchain/langgraph-api, what
// `langgraphjs dev` runs) in this process, without the CLI's file watcher
// and browser. The last argument is the server's options as JSON
// ({port, host, cwd, graphs, nWorkers}); run it as
//   node --import ./node_modules/@langchain/langgraph-api/dist/preload.mjs refserver.mjs '<json>'
// (the preload hook makes the graphs import the server's @langchain/langgraph,
// as `langgraphjs dev` does). Prints "ready <host:port>" when it serves.
import { startServer } from "@langchain/langgraph-api/server";

const options = JSON.parse(process.argv.at(-1));
process.env.PORT = String(options.port);
const { host } = await startServer({ nWorkers: 10, ...options });
console.log(`ready ${host}`);
