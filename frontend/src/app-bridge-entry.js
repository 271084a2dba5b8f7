// Entry point for static/vendor/ext-apps-app-bridge.js.
//
// Re-exports the host side of MCP Apps (AppBridge) from
// @modelcontextprotocol/ext-apps so that plain ES modules in static/js can use
// it without a build step of their own. Build with `npm run build`.
export {
  AppBridge,
  PostMessageTransport,
  buildAllowAttribute,
  getToolUiResourceUri,
  isToolVisibilityAppOnly,
  isToolVisibilityModelOnly,
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
  RESOURCE_MIME_TYPE,
  RESOURCE_URI_META_KEY,
  SANDBOX_PROXY_READY_METHOD,
  SANDBOX_RESOURCE_READY_METHOD,
  INITIALIZE_METHOD,
  INITIALIZED_METHOD,
  McpUiResourceCspSchema,
  McpUiResourcePermissionsSchema,
  McpUiHostContextSchema,
} from "@modelcontextprotocol/ext-apps/app-bridge";

// widget-host.js uses its own origin-pinned transport (PostMessageTransport
// posts with targetOrigin "*" and does not check event.origin); it validates
// incoming messages with the same schema the SDK transport uses.
export { JSONRPCMessageSchema } from "@modelcontextprotocol/core";
