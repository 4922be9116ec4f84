/**
 * The gRPC transport (placeholder until the protobuf codec lands).
 *
 * @module
 */

import { ClientValueError } from "./errors.ts";
import type { TritonUrl } from "./url.ts";

/** The gRPC transport of `ModelClient`. */
export class GrpcTransport {
  /**
   * Creates a transport.
   *
   * @param url The server URL.
   */
  constructor(url: TritonUrl) {
    throw new ClientValueError(`Cannot connect to ${url.withScheme}: gRPC is not available yet`);
  }
}
