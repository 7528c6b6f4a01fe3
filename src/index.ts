export { Broker } from './broker/broker.js';
export type { BrokerEvents, BrokerStats } from './broker/broker.js';
export type { AsyncApiOptions, PublishedQueue } from './asyncapi/describe-broker.js';
export type { JsonSchemaConverter } from './asyncapi/payload-schema.js';
export type {
  AsyncApiChannel,
  AsyncApiDocument,
  AsyncApiMessage,
  AsyncApiOperation,
  AsyncApiServer,
  JsonSchema,
} from './asyncapi/asyncapi-document.js';
export type { BrokerOptions, GaleraOptions, Logger } from './broker/broker-options.js';
export type { HeartbeatOptions } from './broker/heartbeat.js';
export type { ListenerStats } from './broker/notify-listener.js';
export { defineTable, Queue, QueueTable } from './definition/define-table.js';
export type { DdlDialectName } from './definition/define-table.js';
export { Outcome } from './delivery/outcome.js';
export type { Message } from './delivery/message.js';
export type { HandlerTransaction } from './delivery/delivery-transaction.js';
export type { StandardSchemaV1 } from './delivery/standard-schema.js';
export type {
  DedupeMode,
  KeyedPublishOptions,
  KeyedPublishResult,
  PublishItem,
  PublishOptions,
} from './publish/publish-options.js';
export { createDedupeWindowsTableSql } from './publish/dedupe-windows.js';
export { createQueueControlsTableSql } from './broker/queue-controls.js';
export type {
  BatchHandler,
  ThreadOptions,
  DecodeFailurePolicy,
  Decoder,
  Handler,
  HandlerContext,
  DeadLetterOptions,
  SubscribeOptions,
  SubscribeOptionsBase,
} from './subscription/subscription-options.js';
export type { SubscriptionStats } from './subscription/subscription.js';
export type { ConcurrencyOption } from './subscription/concurrency-limits.js';
export type { RateOption, RateLimitSettings } from './subscription/rate-limit.js';
export { createRateLimitsByKeyTableSql, createRateLimitsTableSql } from './subscription/rate-limit.js';
export type { ConcurrencyLimits } from './claim/form-context.js';
export type { DeliveryFailureDetail } from './subscription/delivery-runner.js';
export type { CancelResult } from './broker/message-cancel.js';
export { createCancellationsTableSql } from './broker/message-cancel.js';
export type {
  CancelledEvent,
  DeadLetteredEvent,
  DeliveryEvent,
  LeaseLostEvent,
  LifecycleEventName,
  LifecycleEvents,
  RetryingEvent,
  SettledEvent,
  SettledEventOutcome,
  TimedOutEvent,
} from './subscription/lifecycle-events.js';
export { TIMEOUT_HEADER } from './delivery/message-timeout.js';
export type { PoolStats } from './driver/driver.js';
export { PROMETHEUS_CONTENT_TYPE } from './observability/metric-registry.js';
export type { MetricsEndpoint, ServeMetricsOptions } from './observability/metrics-endpoint.js';
export type { SettledOutcome } from './observability/broker-metrics.js';
export { defineOutbox, OutboxTable } from './outbox/define-outbox.js';
export type { OutboxDeclaration } from './outbox/define-outbox.js';
export { Outbox } from './outbox/outbox.js';
export { Relay } from './outbox/relay.js';
export type { RelayStats } from './outbox/relay-runtime.js';
export type { RelayWaitingName } from './outbox/name-backoffs.js';
export type { RelayOptions } from './outbox/relay-options.js';
export { OUTBOX_RECORD_ID_HEADER } from './outbox/destination.js';
export type { OutboxDestination, OutboxRecord, RefusalCandidate, RelayTransaction } from './outbox/destination.js';
export { queueDestination } from './outbox/queue-destination.js';
export type { QueueDestinationOptions, QueuePublisher } from './outbox/queue-destination.js';
export { DedupeTable, defineDedupeTable } from './outbox/dedupe.js';
export { createSchedulesTableSql } from './schedule/schedules-table.js';
export { SCHEDULED_AT_HEADER } from './schedule/schedule-options.js';
export type { ScheduleOptions } from './schedule/schedule-options.js';
export type { MissedPolicy } from './schedule/tick-plan.js';
export type { ScheduleStats } from './schedule/scheduler.js';
export { createMaintenanceTableSql } from './retention/maintenance-table.js';
export type { RetainOptions, RetainedDeadLetters } from './retention/retention-options.js';
export type { PrunedCounts, RetentionStats } from './retention/retainer.js';
export type { DedupeDeclaration } from './outbox/dedupe.js';
export { openQueueInspector } from './admin/open-queue-inspector.js';
export type { InspectorColumnNames, QueueInspectorOptions, RequeueProgress, TableQueueInspector } from './admin/open-queue-inspector.js';
export type { DeadLetterLocation, GroupCounts, InWorkIndexState, PeekedRow, QueueInspector, TableInspection } from './admin/inspection.js';
export { createNatsDestination, NatsDestination } from './outbox/nats/nats-destination.js';
export type { NatsDestinationOptions, NatsStreamOptions } from './outbox/nats/nats-destination.js';
export { createRabbitMqDestination, RabbitMqDestination } from './outbox/rabbitmq/rabbitmq-destination.js';
export type { RabbitMqDestinationOptions, RabbitMqExchangeType } from './outbox/rabbitmq/rabbitmq-destination.js';
export { DIALECT_INTERFACE_VERSION } from './dialect/dialect.js';
export { createDialect as builtInDialect } from './dialect/create-dialect.js';
export { defineDialect, DIALECT_RESULT_COLUMNS } from './dialect/define-dialect.js';
export type { DialectDefinition, DialectOverrides } from './dialect/define-dialect.js';
export type {
  BuiltInDialectName,
  CreateTableOptions,
  DeadLetterTarget,
  Dialect,
  DialectCapabilities,
  DialectName,
  FifoStatements,
  IndexStatements,
  InsertOptions,
  InsertStatements,
  LeaseClaim,
  LeaseClaimOptions,
  LeaseSettleMany,
  LeaseSettleManyRequest,
  LeaseStatements,
  RowLockStatements,
  SchemaStatements,
  SessionStatements,
  SettleStatements,
  TableColumns,
  TextCollationStatements,
} from './dialect/dialect.js';
export type { AdvisoryStatements, AdvisoryTake } from './dialect/advisory-statements.js';
export type { DedupeStatements } from './dialect/dedupe-statements.js';
export type { NotifyStatements } from './dialect/notify.js';
export type { ParamName, Statement } from './statement.js';
export type {
  ClaimFormName,
  ClockName,
  IsolationLevel,
  KeyPart,
  ServiceStatementName,
  ServiceStatements,
  SqliteBeginMode,
  TableDeclaration,
  TableSpec,
} from './table/table-spec.js';
export {
  AlreadySubscribedError,
  BatchRolledBackError,
  CancelledError,
  ClosedError,
  ConnectionBudgetError,
  PoolExhaustedError,
  ConnectionError,
  DecodeError,
  DeclarationError,
  DedupeContendedError,
  DestinationError,
  DialectVersionError,
  EncodeError,
  HandlerError,
  HandlerTimeoutError,
  InternalError,
  isQueueError,
  LeaseLostError,
  NoRouteError,
  QueueError,
  SchemaError,
  ServerVersionError,
  StatementError,
  TransactionEndedError,
  UnsupportedError,
} from './errors.js';
export type { ErrorCode } from './errors.js';
export { defineRoutes } from './routing/define-routes.js';
export type { RoutedName, RoutedPayload, RouteMap, RouteOf } from './routing/define-routes.js';
export { Router } from './routing/router.js';
export type { ByNameSubscribeOptions } from './routing/by-name-subscription.js';
export { MAX_ROUTE_NAME_CHARACTERS } from './routing/route-name.js';
