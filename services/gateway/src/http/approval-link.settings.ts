/** The provider token of the resolve-by-link settings. */
export const GATEWAY_LINKS = Symbol('GATEWAY_LINKS');

/** Resolve-by-link: the key its links are signed with (none: links are refused), and who resolves. */
export interface ApprovalLinkSettings {
  secret: string | undefined;
  /** The identity a link's resolution is journaled as. */
  identity: string;
}
