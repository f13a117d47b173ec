import type { RouteDef } from '../../route.ts';
import { streamGeneration } from './generation-stream.ts';
import { streamWorkspaceEvents } from './events-stream.ts';

/** The live streams (docs/streaming.md); the WebSocket endpoint /v1/ws is served beside the routes (http/streams/ws.ts). */
export const streamRoutes: RouteDef[] = [streamGeneration, streamWorkspaceEvents];
