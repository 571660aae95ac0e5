// The two classes of the official MCP TypeScript SDK that tests/helpers/mcp_client.mjs uses,
// imported here so that node resolves the SDK from this directory's node_modules (a bare
// import in tests/helpers/ would look in tests/helpers/node_modules, tests/node_modules, ...),
// through the package's exports map, as any ESM client of the SDK imports it.
export { Client } from "@modelcontextprotocol/sdk/client/index.js";
export { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
