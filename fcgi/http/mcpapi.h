/*
 * mcpapi.h - POST /mcp: the Model Context Protocol surface of port 8080 (its requests checked,
 * read and answered over FastCGI; the protocol itself is mcp.h's).
 */
#ifndef CODEBOX_MCPAPI_H
#define CODEBOX_MCPAPI_H

#include <fcgiapp.h>

/*
 * POST /mcp: one JSON-RPC message (mcp.h). Checked first, as the specification says: the Host
 * and the Origin (DNS rebinding: loopback names and origins, the server's own origin, and
 * those CODEBOX_MCP_HOSTS and CODEBOX_MCP_ORIGINS list, from the pool's environment or, for
 * origins, nginx.conf's fastcgi_param), then the Content-Type (a CORS "simple" request cannot
 * send application/json without a preflight) and MCP-Protocol-Version; notifications and
 * responses get 202.
 */
/* (its endpoint's handler, http.h; port: the struct worker_request) */
void mcpapi_handle(void *port, FCGX_Request *req);

#endif
