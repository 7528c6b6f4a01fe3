export { Broker } from './broker/broker.js';
export type { BrokerEvents, BrokerStats } from './broker/broker.js';
export type { BrokerOptions, Logger } from './broker/broker-options.js';
export type { ListenerStats } from './broker/notify-listener.js';
export { defineTable, Queue, QueueTable } from './definition/define-table.js';
export type { DdlDialectName } from './definition/define-table.js';
export { Outcome } from './delivery/outcome.js';
export type { Message } from './delivery/message.js';
export type { HandlerTransaction } from './delivery/delivery-transaction.js';
export type { StandardSchemaV1 } from './delivery/standard-schema.js';
export type { PublishItem, PublishOptions } from './publish/publish-options.js';
export type {
  BatchHandler,
  ThreadOptions,
  DecodeFailurePolicy,
  Decoder,
  Handler,
  HandlerContext,
  SubscribeOptions,
} from './subscription/subscription-options.js';
export type { SubscriptionStats } from './subscription/subscription.js';
export type { PoolStats } from './driver/driver.js';
export type {
  ClaimFormName,
  ClockName,
  IsolationLevel,
  SqliteBeginMode,
  TableDeclaration,
  TableSpec,
} from './table/table-spec.js';
export {
  AlreadySubscribedError,
  BatchRolledBackError,
  ClosedError,
  ConnectionBudgetError,
  ConnectionError,
  DecodeError,
  DeclarationError,
  EncodeError,
  isQueueError,
  LeaseLostError,
  QueueError,
  SchemaError,
  ServerVersionError,
  StatementError,
  TransactionEndedError,
  UnsupportedError,
} from './errors.js';
export type { ErrorCode } from './errors.js';
