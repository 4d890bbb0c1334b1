// Package agentapitest proves baton's Agent Server API (package agentapi)
// with LangGraph's official clients, side by side with LangGraph's
// reference server.
//
// The same client scripts (clients/: the Python SDK langgraph-sdk 0.4.14,
// sync and async, and the JS SDK @langchain/langgraph-sdk 2.0.0, both
// pinned in lockfiles here) drive the reference server
// (@langchain/langgraph-api 2.0.0, what `langgraphjs dev` runs) and a real
// baton runner serving the same graphs (project/: in JS, and in Python for
// baton's Python graph worker). Each prints a normalised transcript: event
// names, order and payloads with ids and times replaced by placeholders.
// The test compares them; every difference it accepts is listed, with its
// reason, in differences_test.go, and copied to docs/agent-server.md.
//
// make test installs what it needs from the lockfiles (package-lock.json,
// requirements.lock); without node or python the test skips, saying so,
// and fails instead when BATON_REQUIRE_NODE or BATON_REQUIRE_PYTHON is set.
package agentapitest
