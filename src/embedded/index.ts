export { createEmbeddedClient, type EmbeddedClient, type EmbeddedClientOptions } from './embedded-client.js';
