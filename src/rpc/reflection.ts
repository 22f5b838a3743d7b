// gRPC server reflection (grpc.reflection.v1 and v1alpha), from the descriptors the generated code
// embeds: grpcurl, grpcui, Postman and `buf curl` find the services, their methods and messages
// without .proto files. It reveals only the schema, which ships in the SDK anyway, so it is open to
// every caller (docs/operations.md, "gRPC reflection").

import { type DescEnum, type DescFile, type DescMessage, type DescService, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import { Health } from "@trove/sdk/gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "@trove/sdk/gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1Alpha } from "@trove/sdk/gen/grpc/reflection/v1alpha/reflection_pb.js";

/** A reflection request, as both versions shape it (their fields are the same). */
interface ReflectionRequest {
  host: string;
  messageRequest:
    | { case: "fileByFilename"; value: string }
    | { case: "fileContainingSymbol"; value: string }
    | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
    | { case: "allExtensionNumbersOfType"; value: string }
    | { case: "listServices"; value: string }
    | { case: undefined; value?: undefined };
}

type Answer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/** What reflection knows: the services it lists, and every file they need, by name and by symbol. */
class Schema {
  readonly serviceNames: string[];
  private readonly files = new Map<string, DescFile>();
  private readonly symbols = new Map<string, DescFile>();
  private readonly messages = new Set<string>();

  constructor(services: readonly DescService[]) {
    this.serviceNames = services.map((s) => s.typeName);
    for (const service of services) this.addFile(service.file);
  }

  private addFile(file: DescFile): void {
    if (this.files.has(file.proto.name)) return;
    this.files.set(file.proto.name, file);
    for (const dependency of file.dependencies) this.addFile(dependency);
    for (const service of file.services) {
      this.symbols.set(service.typeName, file);
      for (const method of service.methods) this.symbols.set(`${service.typeName}.${method.name}`, file);
    }
    for (const e of file.enums) this.addEnum(e, file);
    for (const m of file.messages) this.addMessage(m, file);
    for (const x of file.extensions) this.symbols.set(x.typeName, file);
  }

  private addEnum(e: DescEnum, file: DescFile): void {
    this.symbols.set(e.typeName, file);
    for (const value of e.values) this.symbols.set(`${e.typeName.slice(0, -e.name.length)}${value.name}`, file);
  }

  private addMessage(m: DescMessage, file: DescFile): void {
    this.symbols.set(m.typeName, file);
    this.messages.add(m.typeName);
    for (const field of m.fields) this.symbols.set(`${m.typeName}.${field.name}`, file);
    for (const oneof of m.oneofs) this.symbols.set(`${m.typeName}.${oneof.name}`, file);
    for (const e of m.nestedEnums) this.addEnum(e, file);
    for (const nested of m.nestedMessages) this.addMessage(nested, file);
    for (const x of m.nestedExtensions) this.symbols.set(x.typeName, file);
  }

  fileByName(name: string): DescFile | undefined {
    return this.files.get(name);
  }

  fileBySymbol(symbol: string): DescFile | undefined {
    return this.symbols.get(symbol.replace(/^\./, ""));
  }

  isMessage(typeName: string): boolean {
    return this.messages.has(typeName.replace(/^\./, ""));
  }
}

/** `file` and everything it imports, each once, the file first, serialized as FileDescriptorProto. */
function withDependencies(file: DescFile): Uint8Array[] {
  const seen = new Set<string>();
  const out: Uint8Array[] = [];
  const visit = (f: DescFile) => {
    if (seen.has(f.proto.name)) return;
    seen.add(f.proto.name);
    out.push(toBinary(FileDescriptorProtoSchema, f.proto));
    for (const dependency of f.dependencies) visit(dependency);
  };
  visit(file);
  return out;
}

function notFound(message: string): Answer {
  return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: message } };
}

function answer(schema: Schema, request: ReflectionRequest): Answer {
  const asked = request.messageRequest;
  switch (asked.case) {
    case "listServices":
      return { case: "listServicesResponse", value: { service: schema.serviceNames.map((name) => ({ name })) } };
    case "fileByFilename": {
      const file = schema.fileByName(asked.value);
      if (!file) return notFound(`file ${JSON.stringify(asked.value)} not found`);
      return { case: "fileDescriptorResponse", value: { fileDescriptorProto: withDependencies(file) } };
    }
    case "fileContainingSymbol": {
      const file = schema.fileBySymbol(asked.value);
      if (!file) return notFound(`symbol ${JSON.stringify(asked.value)} not found`);
      return { case: "fileDescriptorResponse", value: { fileDescriptorProto: withDependencies(file) } };
    }
    case "fileContainingExtension": {
      // No Trove message is extended: every such question is answered "not found".
      const { containingType, extensionNumber } = asked.value;
      return notFound(`extension ${extensionNumber} of ${JSON.stringify(containingType)} not found`);
    }
    case "allExtensionNumbersOfType": {
      if (!schema.isMessage(asked.value)) return notFound(`message type ${JSON.stringify(asked.value)} not found`);
      return {
        case: "allExtensionNumbersResponse",
        value: { baseTypeName: asked.value.replace(/^\./, ""), extensionNumber: [] },
      };
    }
    default:
      return {
        case: "errorResponse",
        value: {
          errorCode: Code.InvalidArgument,
          errorMessage:
            "the request names no question: set list_services, file_by_filename, file_containing_symbol, file_containing_extension or all_extension_numbers_of_type",
        },
      };
  }
}

/**
 * Registers grpc.reflection.v1.ServerReflection and grpc.reflection.v1alpha.ServerReflection. They
 * list `services`, the standard grpc.health.v1.Health and themselves, and describe every file
 * those need.
 */
export function reflectionService(services: readonly DescService[]): (router: ConnectRouter) => void {
  const schema = new Schema([...services, Health, ServerReflectionV1, ServerReflectionV1Alpha]);
  // Each request is answered in order, on the stream it came on, echoing it as the protocol asks.
  async function* info<R extends ReflectionRequest>(requests: AsyncIterable<R>) {
    for await (const request of requests) {
      yield { validHost: request.host, originalRequest: request, messageResponse: answer(schema, request) };
    }
  }
  return (router) => {
    router.service(ServerReflectionV1, { serverReflectionInfo: info });
    router.service(ServerReflectionV1Alpha, { serverReflectionInfo: info });
  };
}
