/**
 * Where the MCP edge answers, and where its RFC 9728 metadata is served. A module of their own: the
 * gateway routes on them at every request, and loads the MCP SDK only for the first that matches.
 */
export const MCP_PATH = '/mcp';
export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';
