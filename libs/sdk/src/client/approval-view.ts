import type { ListApprovalsRequest } from '@toolgate/contracts';

/** An approval as the gateway answers it (with its whole input), and as a list carries it. */
export type {
  ApprovalDetail,
  ApprovalListItem,
  ApprovalView,
  InputPreview,
  ListApprovalsResponse,
} from '@toolgate/contracts';

/** Filters of `client.approvals.list()` (the tenant always comes from the token). */
export type ApprovalFilter = ListApprovalsRequest;
