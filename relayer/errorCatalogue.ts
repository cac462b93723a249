/**
 * Every error code the relayer itself answers with (billing's codes are documented by billing in
 * docs/errors.md). docs/errors.md and the OpenAPI document are written from this table, and a test checks
 * that every code the code base throws is listed here, so the catalogue cannot silently drift.
 */
export interface ErrorEntry {
  status: number;
  why: string;
  fix: string;
}

// `satisfies` (not a type annotation) keeps the literal keys, so `RelayerErrorCode` below is the union of
// the codes written here and a throw site naming any other code does not compile.
export const ERROR_CATALOGUE = {
  // 400: the request itself is wrong
  invalid_json: {
    status: 400,
    why: "The body is not valid JSON.",
    fix: "Send a JSON object with Content-Type: application/json.",
  },
  invalid_request: {
    status: 400,
    why: "A field is missing, has the wrong type or is out of range; the message names the field and what was expected.",
    fix: "Correct the named field (see docs/api.md for every endpoint's fields).",
  },
  unknown_field: {
    status: 400,
    why: "The body holds a field the endpoint does not know (often a typo, e.g. `exeucte_in_groups`).",
    fix: "Remove or correct the field; the message names it.",
  },
  invalid_trigger: {
    status: 400,
    why: "A trigger field is wrong: the message names it (`details.field`) and what was expected (a 5-field cron expression, a known kind, limits in range, a configured chain id).",
    fix: "Correct the named field (docs/triggers.md lists every field and its bounds).",
  },
  invalid_group_id: {
    status: 400,
    why: "A group id is not a positive integer (0 is the wildcard in permission arrays, never a group).",
    fix: "Use the `group_id` returned by POST /groups.",
  },
  invalid_pkp_id: {
    status: 400,
    why: "A PKP id is not a 0x-prefixed 32-byte hex string (or, where allowed, a PKP address).",
    fix: "Use the `pkp_id` returned by POST /pkps/create.",
  },
  invalid_cid: {
    status: 400,
    why: "A CID does not parse as an IPFS CID.",
    fix: "Use the `cid` returned by POST /actions or /actions/cid.",
  },
  invalid_policy: {
    status: 400,
    why: "A signing-policy document does not satisfy the policy schema (docs/policies.md); `details.errors` lists each problem with its JSON path.",
    fix: "Correct the fields named in details.errors; POST /core/v1/policies/evaluate checks a document without storing it.",
  },
  invalid_address: {
    status: 400,
    why: "An address is not a 20-byte hex address, or is the zero address.",
    fix: "Send a 0x-prefixed 40-hex-digit address.",
  },
  invalid_usage_api_key: {
    status: 400,
    why: "`usage_api_key` is not a usage key (malformed, or it is an account key).",
    fix: "Send the usage key value, or its `id` instead.",
  },
  invalid_pagination: {
    status: 400,
    why: "`page_number` or `page_size` is not an integer in range.",
    fix: "page_number >= 0, 1 <= page_size <= 100.",
  },
  invalid_idempotency_key: {
    status: 400,
    why: "The Idempotency-Key header is empty, longer than 255 characters or holds non-printable characters.",
    fix: "Use a UUID or another printable string of at most 255 characters.",
  },
  overlap_too_long: {
    status: 400,
    why: "`overlap_seconds` of a key rotation is longer than the maximum (2592000 seconds, 30 days).",
    fix: "Send an overlap between 0 and 2592000 seconds.",
  },
  expiration_in_past: {
    status: 400,
    why: "`expiration` is not in the future.",
    fix: "Send a unix time (seconds) in the future, or null for no expiration.",
  },
  too_many_entries: {
    status: 400,
    why: "A list in the request has more entries than allowed.",
    fix: "Split the change into several requests.",
  },
  webhook_url_invalid: {
    status: 400,
    why: "A webhook `url` is not an absolute https:// URL (http:// only where the operator allows private addresses), holds a user name, password or #fragment, is over 2048 characters, or its host does not resolve.",
    fix: "Send the public https URL of your receiver, e.g. https://example.com/sigil-webhooks; authenticate deliveries by their Sigil-Signature.",
  },
  webhook_url_refused: {
    status: 400,
    why: "A webhook `url`'s host is, or resolves to, an address deliveries never go to: loopback, private, link-local, cloud metadata, carrier-grade NAT, IPv4-mapped IPv6 and the like (`details.address`, `details.category`).",
    fix: "Use a host with public addresses only; an operator on a private network can allow ranges with SIGIL_WEBHOOK_ALLOW_ADDRESSES.",
  },
  invalid_event_type: {
    status: 400,
    why: "`event_types` is empty, mixes `*` with types, or names a type that does not exist (`details.known` lists them).",
    fix: 'Send a list of the types in docs/webhooks.md, or ["*"] for all of them.',
  },
  invalid_chain_event: {
    status: 400,
    why: "A chain-event trigger's spec is wrong: a bad contract address, an event signature that does not parse, a topic0 that is not the event's hash, or more than three topic filters; `details.field` names the field.",
    fix: "Correct the named field (docs/triggers.md, Chain events): a full event signature with `indexed`, topic filters as 32-byte topics or addresses.",
  },
  chain_not_configured: {
    status: 400,
    why: "The chain id is not one of the chains this service is configured to reach (`details.configured` lists them).",
    fix: "Use one of the listed chain ids, or ask the operator to add the chain to SIGIL_CHAINS.",
  },
  backfill_too_deep: {
    status: 400,
    why: "A chain-event trigger's `from_block` lies more than 50,000 blocks behind the chain's head.",
    fix: "Start the backfill at most 50,000 blocks back (`details.head` is the head); older history belongs to an indexer.",
  },
  json_too_deep: {
    status: 400,
    why: "The JSON body is nested deeper than 32 levels (objects and arrays, `js_params` included), counted before anything parses it.",
    fix: "Flatten the data; send deep structures as a string (e.g. JSON inside a `js_params` string) and parse it in the action.",
  },
  header_too_long: {
    status: 400,
    why: "X-Api-Key, Authorization, X-Correlation-Id, X-Operator-Token or Stripe-Signature is longer than 1024 bytes; `details.header` names it.",
    fix: "Send the header's real value (a key is under 80 characters).",
  },
  invalid_query: {
    status: 400,
    why: "The query string is longer than 1024 bytes, or repeats a parameter.",
    fix: "Send each parameter once (`?page_number=1&page_size=50`).",
  },
  string_too_long: {
    status: 400,
    why: "A name, description or CID is longer than allowed.",
    fix: "Shorten it; the message gives the maximum.",
  },
  forward_call_not_allowed: {
    status: 400,
    why: "A forward request targets something other than the registry, carries value, asks for gas out of range or too little, or calls a function a usage key may not forward (`details.reason`).",
    fix: "Build the request with POST /forward/prepare (or the SDK); only group, PKP and action writes are relayed.",
  },
  forward_request_expired: {
    status: 400,
    why: "A forward request's deadline has passed, or is more than an hour away.",
    fix: "Prepare and sign a fresh request; send it within its deadline.",
  },
  forward_request_required: {
    status: 400,
    why: "A signed request (Sigil-* headers) asked for a write: the relayer never holds that key, so it cannot sign the chain transaction for it.",
    fix: "Sign a forward request (POST /forward/prepare, then POST /forward; the SDK does this), or send the key as a bearer credential.",
  },
  // 401: who are you?
  webhook_signature_invalid: {
    status: 401,
    why: "An inbound hook call to a trigger that verifies an HMAC carried no signature header, or one that is not the HMAC-SHA256 of the raw body under the trigger's secret.",
    fix: "Sign the raw body with the secret shown when the trigger was created, in the header the trigger names (docs/triggers.md).",
  },
  missing_api_key: {
    status: 401,
    why: "No key in X-Api-Key or Authorization: Bearer.",
    fix: "Send the account key or a usage key in one of those headers.",
  },
  invalid_api_key: {
    status: 401,
    why: "The header holds something that is not a Sigil key (ak_ or uk_ + 64 lowercase hex digits, or a 0x private key); `details.reason` says which rule it broke.",
    fix: "Check that the whole key was copied.",
  },
  unknown_api_key: {
    status: 401,
    why: "The key is well formed but not registered, or it was removed. Removal takes effect on the next request.",
    fix: "Use a live key (check SIGIL_API_KEY: the whole ak_… or uk_… value); ask the account owner for a new usage key (npx sigil keys add).",
  },
  invalid_operator_token: {
    status: 401,
    why: "GET /health carried an X-Operator-Token that does not match the configured operator token (or none is configured).",
    fix: "Send SIGIL_OPERATOR_TOKEN's value, or no header for the public `{status}` view.",
  },
  api_key_expired: {
    status: 401,
    why: "The usage key's expiration has passed.",
    fix: "Ask the account owner for a new key (or to update its expiration).",
  },
  signature_malformed: {
    status: 401,
    why: "A signed request lacks one of the Sigil-* headers, has one in the wrong format, or also carries a key (X-Api-Key / Bearer); `details.missing` lists absent headers.",
    fix: "Send all five Sigil-* headers as docs/api.md (Signed requests) describes, and no key.",
  },
  signature_body_mismatch: {
    status: 401,
    why: "The body's SHA-256 is not Sigil-Content-Sha256: the body changed after it was signed.",
    fix: "Hash and sign exactly the bytes you send.",
  },
  signature_expired: {
    status: 401,
    why: "Sigil-Timestamp is more than 120 s away from the service's clock (`details.skew_seconds`).",
    fix: "Sign each request when you send it; keep the client's clock in sync (NTP).",
  },
  signature_invalid: {
    status: 401,
    why: "The signature is not Sigil-Key's over this request for this service (wrong key, or method, path, timestamp, nonce or deployment differ from what was signed).",
    fix: "Sign the exact bytes of docs/api.md (Signed requests) with the key whose address is Sigil-Key.",
  },
  signature_replayed: {
    status: 401,
    why: "This key already used this Sigil-Nonce within the replay window.",
    fix: "Use a fresh random nonce (and signature) for every request, retries included.",
  },
  forward_signature_invalid: {
    status: 401,
    why: "A forward request's EIP-712 signature is not `from`'s for this chain's forwarder: it was altered, or signed for another chain or forwarder (`details` names this one).",
    fix: "Sign the request POST /forward/prepare returned, with its domain, and send it unchanged.",
  },
  siwe_invalid: {
    status: 401,
    why: "A wallet sign-in (EIP-4361) message or its signature is malformed, lacks the session-key resource or an Expiration Time, is valid for more than an hour, was not signed by its address, or the request was not signed by the session key the message names.",
    fix: "Build the message with the SDK's siweMessage (sdk/siwe.ts), sign it with the owner's wallet, and sign each request with the session key it names.",
  },
  siwe_wrong_domain: {
    status: 401,
    why: "The sign-in message was made for another site: its domain or URI is not on one of the service's public URLs (`SIGIL_PUBLIC_URLS`), whatever the `Host` header (`details.domain`, `details.public_urls`).",
    fix: "Sign in on this service's own page; behind a proxy, the operator sets `SIGIL_PUBLIC_URLS` to the URL users open.",
  },
  siwe_wrong_chain: {
    status: 401,
    why: "The sign-in message's Chain ID is not the chain of this service's registry (`details.expected`).",
    fix: "Sign with the wallet on the service's chain (GET /core/v1/config, chain_id).",
  },
  siwe_expired: {
    status: 401,
    why: "The sign-in message's Expiration Time has passed, or its Issued At / Not Before is in the future.",
    fix: "Sign in again (a session lasts at most an hour).",
  },
  siwe_not_owner: {
    status: 401,
    why: "The message's address owns no Sigil account, or no longer owns it (ownership moved since the sign-in).",
    fix: "Sign with the wallet that is the account's on-chain owner (GET /core/v1/account, owner_address).",
  },
  siwe_owner_is_contract: {
    status: 401,
    why: "The message names a contract (a Safe) and an EOA signed it: a Safe cannot sign in with a wallet signature.",
    fix: "A Safe's owners make changes with the Safe tool (npm run safe) or a Transaction Builder file from the dashboard; read with the account key.",
  },
  siwe_nonce_replayed: {
    status: 401,
    why: "This sign-in message's nonce was already used to sign in.",
    fix: "Sign a new message with a fresh random nonce.",
  },
  siwe_session_revoked: {
    status: 401,
    why: "This wallet session was signed out (POST /core/v1/auth/siwe/sign_out, on any instance): its session key is refused until the session would have expired (`details.session_key`).",
    fix: "Sign in again with the wallet (a new message and a new session key).",
  },
  // 403: you may not
  siwe_read_only: {
    status: 403,
    why: "An owner signed in with a wallet may only read (GET): the service never makes a change as a ChainSecured account's owner.",
    fix: "Make the change as a transaction from the owner's wallet or Safe (the dashboard prepares it).",
  },
  owner_only: {
    status: 403,
    why: "Usage-key management and ownership transfer are owner-only; a usage key can never do them.",
    fix: "Use the account key (API mode) or send the transaction from the owner wallet (ChainSecured mode).",
  },
  missing_scope: {
    status: 403,
    why: "The usage key lacks the scope the operation needs; `details.scope` and `details.group_id` name it (group_id 0 = account-wide).",
    fix: "The owner grants it: npx sigil keys update <key id> --name <name> with the scope's flag (--can-create-pkps, --can-create-groups, --can-delete-groups, --manage-actions <group>, --add-pkp <group>, --remove-pkp <group>) and the key's other permissions (update replaces them all), or the dashboard's usage-key form.",
  },
  not_authorized_to_execute: {
    status: 403,
    why: "A usage key: no group that this key may execute in lists both this CID and this PKP; the message names both, and `details.group_id`, `details.missing` and `details.command` say what to add where. The account key: the PKP is not one of this account's (it runs any code with its own PKPs, no group needed).",
    fix: "Run the command in `details.command` with the account key: npx sigil groups add <group> --action <cid> and/or --pkp <pkp id> (a group the key may execute in), or grant the key execute on a group that lists both (npx sigil keys update <key id> --name <name> --execute <group>).",
  },
  not_authorized_to_pin: {
    status: 403,
    why: "Pinning code (POST /actions, or a CID fetched from IPFS and stored) needs the account key or a usage key with a manage-actions or execute scope.",
    fix: "Pin with the account key, or give the key such a scope.",
  },
  // 404: no such thing
  route_not_found: {
    status: 404,
    why: "No endpoint has this path.",
    fix: "See docs/api.md or /core/v1/openapi.json.",
  },
  account_not_found: {
    status: 404,
    why: "The account does not exist.",
    fix: "Check the key; create an account with POST /core/v1/new_account.",
  },
  group_not_found: {
    status: 404,
    why: "The account has no live group with this id (it never existed or was deleted).",
    fix: "List groups with GET /groups.",
  },
  pkp_not_found: {
    status: 404,
    why: "No PKP with this id exists in this account.",
    fix: "List PKPs with GET /pkps.",
  },
  usage_key_not_found: {
    status: 404,
    why: "The account has no live usage key with this value or id.",
    fix: "List keys with GET /list_api_keys.",
  },
  trigger_not_found: {
    status: 404,
    why: "No trigger with this id (or hook id) in this account: it never existed, was deleted, or (for a hook) is disabled.",
    fix: "List triggers with GET /core/v1/triggers.",
  },
  trigger_run_not_found: {
    status: 404,
    why: "The trigger has no run with this id.",
    fix: "List its runs with GET /core/v1/triggers/{id}/runs.",
  },
  webhook_not_found: {
    status: 404,
    why: "The account has no webhook endpoint with this id.",
    fix: "List endpoints with GET /core/v1/webhooks.",
  },
  webhook_delivery_not_found: {
    status: 404,
    why: "The endpoint has no delivery with this id.",
    fix: "List deliveries with GET /core/v1/webhooks/{id}/deliveries.",
  },
  policy_not_found: {
    status: 404,
    why: "No signing-policy document is stored under the CID.",
    fix: "Upload the document with POST /policies (it answers the CID), or send it inline as `policy`.",
  },
  action_not_found: {
    status: 404,
    why: "The CID's code is neither in the content store nor on a configured IPFS gateway.",
    fix: "Pin the code with POST /actions, or send it inline as `code`.",
  },
  // 405
  method_not_allowed: {
    status: 405,
    why: "The path exists but not with this method; the Allow header lists the methods.",
    fix: "Use one of the allowed methods.",
  },
  // 409: state conflicts
  trigger_limit_reached: {
    status: 409,
    why: "The account already has the maximum number of triggers (50 unless the operator configured another).",
    fix: "Delete a trigger you no longer need.",
  },
  account_chain_secured: {
    status: 409,
    why: "The account's owner is no longer the service-managed address (ChainSecured mode), so the account key cannot write or execute on its behalf.",
    fix: "Send the transaction from the owner wallet (path B), or use a usage key the owner registered.",
  },
  idempotency_key_in_flight: {
    status: 409,
    why: "A request with this Idempotency-Key is still running on a live instance (this or another) and did not answer within 30 s. The holder of a key proves it is alive every second; a retry takes over a key whose holder stopped (crashed) for 10 s and continues from what it recorded (a write is never made twice; an execution may run again).",
    fix: "Retry after Retry-After with the same key; the retry gets the first request's answer once it has one, or continues its work if its instance died.",
  },
  idempotency_key_reused: {
    status: 409,
    why: 'This Idempotency-Key was already used with a different method, path or body within 24 h. Also (`details.reason: "answer_lost"`): an earlier attempt with this key made a write whose answer held a new key (new_account, a new usage key), then crashed before answering; that key was never stored, so the answer cannot be given again (`details.tx_hash`: the write).',
    fix: "Use a fresh Idempotency-Key for a different request. For `answer_lost`: the write is on chain with a key nobody holds (remove that usage key; for an account, create another); a new Idempotency-Key makes a new one.",
  },
  address_in_use: {
    status: 409,
    why: "The address is already an owner, master key or usage key; an address may hold one role only.",
    fix: "Use another address.",
  },
  no_pending_transfer: {
    status: 409,
    why: "There is no ownership transfer to cancel or accept.",
    fix: "Start one with POST /account/transfer_ownership.",
  },
  pkp_already_in_group: {
    status: 409,
    why: "The PKP is already a member of the group.",
    fix: "Nothing to do; remove it first to re-add.",
  },
  pkp_not_in_group: {
    status: 409,
    why: "The PKP is not a member of the group.",
    fix: "List the group's members with GET /groups/:id.",
  },
  action_already_in_group: {
    status: 409,
    why: "The CID is already listed in the group.",
    fix: "Nothing to do.",
  },
  action_not_in_group: {
    status: 409,
    why: "The CID is not listed in the group.",
    fix: "List the group's actions with GET /groups/:id.",
  },
  too_many_members: {
    status: 409,
    why: "The group would hold more PKPs or actions than allowed.",
    fix: "Use another group.",
  },
  too_many_groups: {
    status: 409,
    why: "The account already has the maximum number of live groups (the registry bounds a wildcard execute check's gas).",
    fix: "Delete groups that are no longer used, or put more PKPs and actions into existing groups.",
  },
  too_many_webhooks: {
    status: 409,
    why: "The account already has the most webhook endpoints allowed (16 by default; `details.max`).",
    fix: "Delete an endpoint, or subscribe one endpoint to more event types.",
  },
  webhook_disabled: {
    status: 409,
    why: "A resend was asked for on a disabled endpoint (disabled by hand, or by three days of failed deliveries: its `notice` says which).",
    fix: 'Enable it with POST /core/v1/webhooks/{id} {"enabled": true}; pending deliveries start again.',
  },
  webhook_delivery_in_progress: {
    status: 409,
    why: "The delivery is being attempted at this moment (by this or another instance).",
    fix: "Wait for the attempt's outcome in the delivery log, then resend if it failed.",
  },
  usage_key_expired: {
    status: 409,
    why: "The usage key being changed has expired; expired keys cannot be updated.",
    fix: "Remove it and create a new one.",
  },
  rotation_scopes_changed: {
    status: 409,
    why: "The key's scopes changed (an update through another instance or path B) after they were read; the registry refused the rotation, nothing was written.",
    fix: "Retry: the rotation copies the scopes as they are now.",
  },
  write_reverted: {
    status: 409,
    why: "The transaction was mined but reverted (state changed between the check and the write, e.g. a concurrent path-B change).",
    fix: "Re-read the state and retry.",
  },
  // 413 / 415
  payload_too_large: {
    status: 413,
    why: "The body exceeds the size limit (1 MiB by default).",
    fix: "Send less.",
  },
  code_too_large: {
    status: 413,
    why: "Inline `code` exceeds 256 KB (or code from IPFS exceeds 512 KB).",
    fix: "Make the action smaller.",
  },
  pin_quota_exceeded: {
    status: 413,
    why: "The account's pinned code would pass its quota (10 MiB by default); nothing was stored. `details`: bytes, used_bytes, quota_bytes.",
    fix: "Reuse pinned CIDs (free), or ask the operator for more.",
  },
  js_params_too_large: {
    status: 413,
    why: "`js_params` exceeds 64 KB once serialized.",
    fix: "Send less data, or fetch it from the action.",
  },
  unsupported_media_type: {
    status: 415,
    why: "A body was sent without Content-Type: application/json.",
    fix: "Send JSON with that header.",
  },
  forward_nonce_mismatch: {
    status: 409,
    why: "A forward request's nonce is not the forwarder's next nonce for `from`: it was already used (a replay), or another write came first (`details.expected_nonce`). Also the retry of an Idempotency-Key `POST /core/v1/forward` whose request can never execute any more (`details.reason`: `nonce_used` or `expired`).",
    fix: "Prepare and sign a new request (it carries the current nonce).",
  },
  // 429
  rate_limited: {
    status: 429,
    why: "Too many requests for this key, account or IP in the current window.",
    fix: "Wait for the number of seconds in Retry-After.",
  },
  trigger_queue_full: {
    status: 429,
    why: "The trigger already has `max_queued_runs` runs waiting, or fired `runs_per_minute` runs in the last minute; this firing was not stored and costs nothing.",
    fix: "Retry after Retry-After, or raise the trigger's limits.",
  },
  too_many_concurrent_executions: {
    status: 429,
    why: "The account already runs the maximum number of executions at once (10 by default).",
    fix: "Wait for running executions to finish (Retry-After).",
  },
  // 502 / 503: a dependency failed
  action_fetch_failed: {
    status: 502,
    why: "The IPFS gateways failed, or returned content that does not match the CID (it is verified).",
    fix: "Retry later, or pin the code with POST /actions.",
  },
  attestation_unavailable: {
    status: 503,
    why: "With the dstack root-key provider, the TEE's guest agent did not produce a quote for GET /core/v1/attestation; no unquoted document is answered in its place.",
    fix: "Retry after Retry-After; if it persists, the operator checks the CVM's guest agent (docs/enclave.md).",
  },
  chain_unavailable: {
    status: 503,
    why: "The chain's RPC endpoint did not answer in time; nothing was written (or a sent write is not yet confirmed: `details.tx_hash`).",
    fix: "Retry after Retry-After; with an Idempotency-Key a retry never writes twice: it answers from the sent write's receipt if it landed, else sends the same signed request again (docs/consistency.md).",
  },
  database_unavailable: {
    status: 503,
    why: "The service's database (PostgreSQL with `SIGIL_DATABASE_URL`) could not be reached; the charge or record the request needs was not made.",
    fix: "Retry after Retry-After; with an Idempotency-Key a retry never writes twice.",
  },
  no_instance_available: {
    status: 503,
    why: "The cluster's round-robin front (`npm run start:cluster`) found no instance accepting connections; the request reached none.",
    fix: "Retry after Retry-After; restart the stopped instances (docs/deployment.md).",
  },
  instance_connection_lost: {
    status: 502,
    why: "The instance handling the request closed the connection before answering (it stopped or crashed); the request may have run.",
    fix: "Retry with the same Idempotency-Key: a write is then never made twice (the retry reconciles the request the crashed instance recorded with the chain, and answers `Idempotent-Replayed` if it landed); an execution may have run once already. Without a key the write may or may not have happened: read the state before writing again.",
  },
  executor_busy: {
    status: 503,
    why: "Every sandbox worker is busy and the queue is full.",
    fix: "Retry after Retry-After.",
  },
  gas_wallet_unfunded: {
    status: 503,
    why: "The relayer's gas wallets cannot pay for the transaction.",
    fix: "The operator must fund the gas wallets (GET /health with the operator token lists them).",
  },
  internal_error: {
    status: 500,
    why: "A bug. The message never leaks internals; the request_id finds the log line.",
    fix: "Report it with the request_id.",
  },
} satisfies Record<string, ErrorEntry>;

/** Every code the relayer answers with: the catalogue's keys. */
export type RelayerErrorCode = keyof typeof ERROR_CATALOGUE;
