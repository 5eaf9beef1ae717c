/**
 * kvroute: KV-cache-aware request routing for LLM fleets.
 *
 * @packageDocumentation
 */

export type { BackendName } from './backend.js';
export { backend, nativeAvailable, nativeLoadError } from './backend.js';
export type { KvRouteErrorCode } from './errors.js';
export { isKvRouteError, KvRouteError } from './errors.js';
export { JsonFloat } from './events/json-float.js';
export { parseEvents, stringifyEvents } from './events/text.js';
export type {
  BlockExtraInfo,
  BlockMmObjectInfo,
  DumpedBlock,
  DumpedCacheEvent,
  DumpedData,
  DumpedEvent,
  DumpedPayload,
  KvCacheEvent,
  KvCacheEventData,
  RemovedData,
  RemovedPayload,
  RouterEvent,
  StorageTier,
  StoredBlock,
  StoredData,
  StoredPayload,
  U64Like,
} from './events/types.js';
export type { BackendOption, BlockHashOptions } from './hashing.js';
export { blockHashes, sequenceHashes, xxh3_64 } from './hashing.js';
export { decodeEngineBatch } from './ingest/decode.js';
export { EngineSource } from './ingest/source.js';
export type {
  ApplyEngineBatchOptions,
  BatchResult,
  BlockSizeMismatch,
  DecodedAllBlocksCleared,
  DecodedBatch,
  DecodedBlockRemoved,
  DecodedBlockStored,
  DecodedEngineEvent,
  DecodedExtraKey,
  EngineBlockCounts,
  EngineEventCounts,
  EngineName,
  ExtraKeyBytes,
  ExtraKeyInt,
  ExtraKeyOther,
  ExtraKeyPair,
  ExtraKeyText,
  FilteredCounts,
  IngestStats,
  LowerTiers,
  RankSourceStats,
  SourceState,
  SourceStateChange,
  SourceStats,
  SubscribeOptions,
  TierCounts,
} from './ingest/types.js';
export type {
  AppliedCounts,
  ApproximateOptions,
  IndexStats,
  KvIndexOptions,
  LowerTierStats,
  LowerTiersStats,
  OverlapScores,
  RankRef,
  RejectedCounts,
  SkippedCounts,
  TieredScore,
  WorkerId,
  WorkerScore,
} from './kv-index.js';
export { KvIndex } from './kv-index.js';
export {
  MAX_BLOCKS_PER_EVENT,
  MAX_PROMPTS_PER_BATCH,
  MAX_RANKS_PER_WORKER,
  MAX_SESSION_ID_LENGTH,
  MAX_TOKENS_PER_REQUEST,
  MAX_WORKERS,
} from './limits.js';
export type { DisaggregationMode } from './mock-worker/bootstrap.js';
export type {
  CrashFault,
  DropEventsFault,
  HangFault,
  MockFault,
  MockHttps,
  MockWorkerOptions,
  RecoverFault,
  ResolvedMockOptions,
  RestartFault,
  ScheduledFault,
  SlowFault,
} from './mock-worker/options.js';
export type { MockWorkerStats } from './mock-worker/stats.js';
export type { ChatContentPart, ChatMessage, ChatToolCall } from './mock-worker/tokenizer.js';
export {
  detokenize as mockDetokenize,
  MOCK_CHAT_TEMPLATE,
  renderChat as renderMockChat,
  tokenize as mockTokenize,
} from './mock-worker/tokenizer.js';
export { mockTokenizerConfig, mockTokenizerJson, writeMockTokenizer } from './mock-worker/tokenizer-json.js';
export type { WireAllBlocksCleared, WireBlockRemoved, WireBlockStored, WireEvent, WireFormat } from './mock-worker/wire.js';
export { encodeBatch as encodeEngineBatch } from './mock-worker/wire.js';
export type { MockWorker } from './mock-worker/worker.js';
export { startMockWorker } from './mock-worker/worker.js';
export type { ReplayDisaggregation, ReplayTransferTiming } from './replay/disaggregation.js';
export type { GenerateTraceOptions } from './replay/generate.js';
export { generateTrace, traceToJsonl } from './replay/generate.js';
export type { PreemptionMode } from './replay/preemption.js';
export type { CustomPolicy, ReplayOptions, ReplayPolicy } from './replay/replay.js';
export { replay, upperBoundHitRatio } from './replay/replay.js';
export type { Distribution, LatencyCdf, PolicyReport, ReplayReport, Throughput, TraceSummary, WorkerShare } from './replay/report.js';
export type { ReplicaBalancer, SessionCounts } from './replay/simulate.js';
export type { ResolvedSpeculative, SpeculativeDecoding } from './replay/speculative.js';
export type { TimingModel } from './replay/timing.js';
export type { LoadTraceOptions, Trace, TraceRequest } from './replay/trace.js';
export { loadTrace, parseTrace, synthesizeTokens } from './replay/trace.js';
export type { NatsReplicaOptions, NatsTlsOptions, ReplicaOptions } from './replicas/options.js';
export {
  IndexSnapshotWriter,
  type SnapshotStoreOptions,
  type SnapshotWriterOptions,
  type SnapshotWriterStats,
} from './replicas/snapshot-store.js';
export type { ReplicaStats } from './replicas/sync.js';
export { ReplicaBus, type ReplicaBusOptions, type ReplicaTransport, type ReplicaTransportHandlers } from './replicas/transport.js';
export { type PeerTlsOptions, type WarmStartOptions, type WarmStartResult, warmStart } from './replicas/warm-start.js';
export { KvRouter } from './router/kv-router.js';
export type { KvRouterOptions, QueuePolicy, SelectionPolicy, WorkerType } from './router/options.js';
export type { CandidateScore, Selector } from './router/select.js';
export type { SessionBinding, SessionStats } from './router/session-affinity.js';
export type {
  BatchPrompt,
  PinnedWorker,
  PotentialLoad,
  RankLoad,
  RouteDecision,
  RouteOverrides,
  RouteRequest,
  RouterStats,
  WorkerConfig,
} from './router/types.js';
export type { WorkerView } from './server/admin-api.js';
export type { WorkerHealthState } from './server/breaker.js';
export type { CacheAccuracySnapshot } from './server/cache-accuracy.js';
export type { CorsOptions } from './server/cors.js';
export type { DiscoveryOptions } from './server/discovery-options.js';
export type { ListenerStatus } from './server/fleet-worker.js';
export type { Gateway, GatewayAddress } from './server/gateway.js';
export { createGateway } from './server/gateway.js';
export type {
  AdminListenOptions,
  AuthOptions,
  DisaggregationOptions,
  GatewayOptions,
  GatewayWorker,
  HealthOptions,
  QueueOptions,
  ResponsesOptions,
  ShutdownOptions,
  TokenizeCacheOptions,
  TokenizerOption,
  UpstreamOptions,
} from './server/options.js';
export { metrics } from './server/router-metrics.js';
export type { TlsFileOptions, TlsOptions, TlsPemOptions } from './server/tls.js';
export type { OtlpProtocol, OtlpTlsOptions, TracingOptions } from './server/tracing/options.js';
export type { UpstreamTlsOptions } from './server/upstream-tls.js';
export type { RestReason } from './server/worker-rest.js';
export type { DisaggregationProtocol, WorkerRole } from './server/worker-role.js';
export type { WorkerSetChanges } from './server/worker-set.js';
export type { TokenizerPrefixCacheStats } from './tokenizer/prefix-cache.js';
export {
  type ChatRequest,
  type EncodeOptions,
  TextTokenizer,
  type TextTokenizerOptions,
  type TokenizerPrefixCacheOptions,
} from './tokenizer/text-tokenizer.js';
