// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/**
 * @title IAccountRegistry
 * @notice The whole Sigil permission model (SPEC sections 2 and 5.4): accounts, scoped usage keys, PKPs and
 * groups of {PKPs, action CIDs}. Every write resolves the account from its caller (`_msgSender()`): the
 * account's owner, or a live usage key of that account. Writes arrive either directly (path B, e.g. a Safe)
 * or through the trusted ERC-2771 forwarder (path A, the relayer submitting a request signed by the key).
 *
 * An address is at most one of: an account's owner, an account's master key, a usage key. That keeps the
 * caller → account resolution unambiguous.
 */
interface IAccountRegistry {
    // ------------------------------------------------------------------------------------------------
    // Types
    // ------------------------------------------------------------------------------------------------

    /**
     * @notice The seven scopes of docs/background.md §2.4. The first three are account-wide, the last four per group.
     */
    enum Scope {
        CreatePkp,
        CreateGroup,
        DeleteGroup,
        Execute,
        ManageActions,
        AddPkp,
        RemovePkp
    }

    /**
     * @notice An account. `owner` is the only party that may perform owner-only operations.
     * @param id Stable internal id, sequential from 1.
     * @param owner The account's address (docs/background.md §2.1): an EOA, a service-managed address or a Safe.
     * @param pendingOwner Proposed new owner of a two-step transfer, or zero.
     * @param masterKey Address of the account key (API mode); zero for accounts created from a wallet.
     * @param name Human-readable label.
     * @param groupCount Number of group ids ever assigned (ids run 1..groupCount, never reused).
     * @param pkpCount Number of PKPs created by the account.
     * @param keyCount Number of live (not removed) usage keys, expired ones included.
     */
    struct Account {
        uint64 id;
        address owner;
        address pendingOwner;
        address masterKey;
        string name;
        uint64 groupCount;
        uint64 pkpCount;
        uint64 keyCount;
    }

    /**
     * @notice The permission set of a usage key, in the order and with the names of docs/background.md §2.3.
     * A group id of 0 in any of the four arrays is a wildcard: every group of the key's account.
     */
    struct KeyScopes {
        bool canCreateGroups;
        bool canDeleteGroups;
        bool canCreatePkps;
        uint64[] manageIpfsIdsInGroups;
        uint64[] addPkpToGroups;
        uint64[] removePkpFromGroups;
        uint64[] executeInGroups;
    }

    /**
     * @notice A usage key as returned by views. Its key hash, name and description are not stored: they
     * are in its `KeyAdded` / `KeyUpdated` / `KeyMetadataUpdated` events.
     * @param key The key's address (its id).
     * @param accountId The account the key belongs to.
     * @param expiration Unix time after which the key is treated as absent; 0 = never.
     * @param createdAt Block timestamp of registration.
     * @param scopes The key's scopes; the four id arrays list the wildcard (0) first, then live groups of the
     * account in `listGroups` order (ids of deleted groups no longer count and are left out).
     */
    struct KeyInfo {
        address key;
        uint64 accountId;
        uint64 expiration;
        uint64 createdAt;
        KeyScopes scopes;
    }

    /// @notice A PKP: a derivation path id registered to one account.
    struct PkpInfo {
        bytes32 id;
        uint64 accountId;
        string name;
        string description;
    }

    /**
     * @notice A group's header. Its name, description and the lists of its members are not stored: they are
     * in its events (`GroupCreated`, `PkpAdded`/`PkpRemoved`, `ActionAdded`/`ActionRemoved`); membership is
     * answered on chain by `isPkpInGroup` and `isActionInGroup`.
     */
    struct GroupInfo {
        uint64 id;
        uint64 accountId;
        uint256 pkpCount;
        uint256 actionCount;
    }

    // ------------------------------------------------------------------------------------------------
    // Events (every one indexed by accountId)
    // ------------------------------------------------------------------------------------------------

    /// @notice An account was created by `owner`.
    event AccountCreated(uint64 indexed accountId, address indexed owner, address indexed masterKey, string name);
    /// @notice The owner proposed `newOwner`; nothing changes until `acceptOwnership`.
    event OwnershipTransferStarted(uint64 indexed accountId, address indexed owner, address indexed newOwner);
    /// @notice The owner withdrew a pending transfer to `pendingOwner`.
    event OwnershipTransferCanceled(uint64 indexed accountId, address indexed pendingOwner);
    /// @notice Ownership moved from `previousOwner` to `newOwner`.
    event OwnershipTransferred(uint64 indexed accountId, address indexed previousOwner, address indexed newOwner);
    /// @notice A usage key was registered with `scopes`.
    event KeyAdded(
        uint64 indexed accountId,
        address indexed key,
        bytes32 keyHash,
        string name,
        string description,
        uint64 expiration,
        KeyScopes scopes
    );
    /// @notice A key's permissions were replaced as a whole (docs/background.md §4.1 rule 2).
    event KeyUpdated(
        uint64 indexed accountId,
        address indexed key,
        string name,
        string description,
        uint64 expiration,
        KeyScopes scopes
    );
    /// @notice A key's name and description changed; permissions untouched.
    event KeyMetadataUpdated(uint64 indexed accountId, address indexed key, string name, string description);
    /// @notice A key was removed; it is refused from this block on.
    event KeyRemoved(uint64 indexed accountId, address indexed key);
    /// @notice A PKP was registered to the account.
    event PkpCreated(uint64 indexed accountId, bytes32 indexed pkpId, string name, string description);
    /// @notice A group was created.
    event GroupCreated(uint64 indexed accountId, uint64 indexed groupId, string name, string description);
    /// @notice A group was deleted with all of its members; its id is never reused.
    event GroupDeleted(uint64 indexed accountId, uint64 indexed groupId);
    /// @notice An action CID was listed in a group.
    event ActionAdded(uint64 indexed accountId, uint64 indexed groupId, bytes32 indexed cidHash, string cid);
    /// @notice An action CID was removed from a group. Only the account is indexed: each indexed word costs 375
    /// gas against 256 as data, on the write whose gas is closest to the reference's.
    event ActionRemoved(uint64 indexed accountId, uint64 groupId, bytes32 cidHash);
    /// @notice A PKP was added to a group.
    event PkpAdded(uint64 indexed accountId, uint64 indexed groupId, bytes32 indexed pkpId);
    /// @notice A PKP was removed from a group. Only the account is indexed, as for `ActionRemoved`.
    event PkpRemoved(uint64 indexed accountId, uint64 groupId, bytes32 pkpId);
    /// @notice Emitted when a group's signing policy is set (cid non-empty) or cleared (cid == "").
    /// `cidHash` is keccak256 of `cid` (as for `ActionAdded`), or zero when the policy is cleared. Deleting a
    /// group ends its policy too (`GroupDeleted`), without a separate event.
    event GroupPolicySet(uint64 indexed accountId, uint64 indexed groupId, bytes32 cidHash, string cid);

    // ------------------------------------------------------------------------------------------------
    // Errors
    // ------------------------------------------------------------------------------------------------

    /// @notice `caller` is neither an account owner nor a live usage key.
    error NoAccount(address caller);
    /// @notice `caller` is not the owner of account `accountId` (owner-only operation).
    error NotOwner(address caller, uint64 accountId);
    /// @notice `caller` is a key of `accountId` but lacks `scope` for `groupId` (0 for account-wide scopes).
    error MissingScope(address caller, uint64 accountId, Scope scope, uint64 groupId);
    /// @notice `addr` is already an owner, master key or usage key, so it cannot take a second role.
    error AddressInUse(address addr);
    /// @notice The zero address was given where a real one is required.
    error ZeroAddress();
    /// @notice No account has id `accountId`.
    error UnknownAccount(uint64 accountId);
    /// @notice `key` is not a registered key of the caller's account.
    error UnknownKey(address key);
    /// @notice `key` expired at `expiration`; it is treated as absent.
    error KeyExpired(address key, uint64 expiration);
    /// @notice An expiration that is already in the past was given.
    error ExpirationInPast(uint64 expiration);
    /// @notice Account `accountId` has no live group `groupId`.
    error UnknownGroup(uint64 accountId, uint64 groupId);
    /// @notice No PKP has id `pkpId`, or it belongs to another account than `accountId`.
    error PkpNotInAccount(bytes32 pkpId, uint64 accountId);
    /// @notice The PKP is already a member of the group.
    error PkpAlreadyInGroup(uint64 groupId, bytes32 pkpId);
    /// @notice The PKP is not a member of the group.
    error PkpNotInGroup(uint64 groupId, bytes32 pkpId);
    /// @notice The CID is already listed in the group.
    error ActionAlreadyInGroup(uint64 groupId, string cid);
    /// @notice The CID is not listed in the group.
    error ActionNotInGroup(uint64 groupId, string cid);
    /// @notice An empty CID string was given.
    error EmptyCid();
    /// @notice A CID longer than the maximum was given.
    error CidTooLong(uint256 length, uint256 max);
    /// @notice A name or description longer than the maximum was given.
    error StringTooLong(uint256 length, uint256 max);
    /// @notice The group would hold more members of one kind than the maximum.
    error TooManyMembers(uint64 groupId, uint256 max);
    /// @notice A scope array, the four scope arrays of a key together, or a batch has more entries than the maximum.
    error TooManyEntries(uint256 length, uint256 max);
    /// @notice Account `accountId` already has `max` live groups; delete one first.
    error TooManyGroups(uint64 accountId, uint256 max);
    /// @notice A view was asked for a page larger than the maximum.
    error PageTooLarge(uint256 limit, uint256 max);
    /// @notice `caller` is not the pending owner of account `accountId`.
    error NotPendingOwner(address caller, uint64 accountId);
    /// @notice Account `accountId` has no pending ownership transfer.
    error NoPendingTransfer(uint64 accountId);
    /// @notice The scopes given to `rotateKey` are not the ones `key` holds (stale copy: read them again).
    error ScopesMismatch(address key);
    /// @notice A rotation overlap longer than the maximum was given.
    error OverlapTooLong(uint64 overlap, uint64 max);

    // ------------------------------------------------------------------------------------------------
    // Accounts
    // ------------------------------------------------------------------------------------------------

    /**
     * @notice Create an account owned by the caller.
     * @param name Label of the account.
     * @param masterKey Address of the account key, or zero for an account created from a wallet or Safe.
     * @return accountId The new account's id.
     */
    function createAccount(string calldata name, address masterKey) external returns (uint64 accountId);

    /// @notice Owner only: propose `newOwner`. Refused if `newOwner` already owns an account or is a key.
    function transferOwnership(address newOwner) external;

    /// @notice Owner only: withdraw the pending transfer.
    function cancelOwnershipTransfer() external;

    /// @notice The pending owner of `accountId` accepts ownership; the previous owner loses every power.
    function acceptOwnership(uint64 accountId) external;

    // ------------------------------------------------------------------------------------------------
    // Usage keys (owner only)
    // ------------------------------------------------------------------------------------------------

    /**
     * @notice Register a usage key under the caller's account.
     * @param key The key's address (derived from its private key).
     * @param keyHash keccak256 of the key string, or zero.
     * @param expiration Unix time after which the key is absent; 0 = never.
     */
    function addKey(
        address key,
        bytes32 keyHash,
        string calldata name,
        string calldata description,
        uint64 expiration,
        KeyScopes calldata scopes
    ) external;

    /// @notice Replace every permission and the metadata of `key` (fields left out are reset).
    function updateKey(
        address key,
        string calldata name,
        string calldata description,
        uint64 expiration,
        KeyScopes calldata scopes
    ) external;

    /// @notice Change only the name and description of `key`.
    function updateKeyMetadata(address key, string calldata name, string calldata description) external;

    /// @notice Remove `key`; it is refused from this block on.
    function removeKey(address key) external;

    /**
     * @notice Rotate `oldKey` in one step: register `newKey` with exactly the scopes `oldKey` holds (the
     * registry checks `scopes` against them) and make `oldKey` expire `overlap` seconds from this block, or
     * keep its own expiration if that is sooner. Overlap 0 makes it refused from this block on. Emits
     * KeyAdded for `newKey`, then KeyUpdated for `oldKey` with its new expiration.
     * @param newExpiration The new key's expiration (unix seconds, 0 = never).
     */
    function rotateKey(
        address oldKey,
        uint64 overlap,
        address newKey,
        bytes32 newKeyHash,
        string calldata name,
        string calldata description,
        uint64 newExpiration,
        KeyScopes calldata scopes
    ) external;

    // ------------------------------------------------------------------------------------------------
    // PKPs and groups
    // ------------------------------------------------------------------------------------------------

    /// @notice Register a new PKP (owner, or a key with pkp:create). Returns an id unique across accounts.
    function createPkp(string calldata name, string calldata description) external returns (bytes32 pkpId);

    /**
     * @notice Create a group (owner, or a key with group:create). Initial members are allowed only where the
     * caller could add them afterwards (group:addPkp / group:manageActions on the new id, e.g. wildcard 0).
     */
    function createGroup(
        string calldata name,
        string calldata description,
        bytes32[] calldata pkpIds,
        string[] calldata cids
    ) external returns (uint64 groupId);

    /// @notice Delete a group and its members (owner, or a key with group:delete).
    function deleteGroup(uint64 groupId) external;

    /// @notice List `cid` in `groupId` (owner, or group:manageActions on the group).
    function addAction(uint64 groupId, string calldata cid) external;

    /// @notice Remove `cid` from `groupId` (owner, or group:manageActions on the group).
    function removeAction(uint64 groupId, string calldata cid) external;

    /// @notice Batch form of `addAction`.
    function addActions(uint64 groupId, string[] calldata cids) external;

    /// @notice Batch form of `removeAction`.
    function removeActions(uint64 groupId, string[] calldata cids) external;

    /// @notice Add a PKP of the caller's account to `groupId` (owner, or group:addPkp on the group).
    function addPkp(uint64 groupId, bytes32 pkpId) external;

    /// @notice Remove a PKP from `groupId` (owner, or group:removePkp on the group).
    function removePkp(uint64 groupId, bytes32 pkpId) external;

    /// @notice Batch form of `addPkp`.
    function addPkps(uint64 groupId, bytes32[] calldata pkpIds) external;

    /// @notice Batch form of `removePkp`.
    function removePkps(uint64 groupId, bytes32[] calldata pkpIds) external;

    /// @notice Sets (or with "" clears) the group's policy: the CID of a JSON policy document. Governed like the
    /// group's actions: the owner, or a key holding the manage-actions scope on that group (same check as
    /// addAction). The CID is checked like an action CID (at most MAX_CID_BYTES bytes, else `CidTooLong`).
    function setGroupPolicy(uint64 groupId, string calldata cid) external;

    // ------------------------------------------------------------------------------------------------
    // Views
    // ------------------------------------------------------------------------------------------------

    /// @notice The account with id `accountId` (reverts `UnknownAccount`).
    function getAccount(uint64 accountId) external view returns (Account memory);

    /// @notice Id of the account owned by `owner`, or 0.
    function accountOfOwner(address owner) external view returns (uint64);

    /// @notice Id of the account whose master key is `masterKey`, or 0.
    function accountOfMasterKey(address masterKey) external view returns (uint64);

    /// @notice Id of the account of the live key `key`, or 0 (removed and expired keys give 0).
    function accountOfKey(address key) external view returns (uint64);

    /// @notice A live key (reverts `UnknownKey` when absent, removed or expired).
    function getKey(address key) external view returns (KeyInfo memory);

    /**
     * @notice Whether the live key `key` holds `scope` on `groupId`. Account-wide scopes ignore `groupId`.
     * A per-group scope counts only on a live group of the key's account (as the writes check it); id 0
     * asks whether the key holds the scope through the wildcard.
     */
    function hasScope(address key, Scope scope, uint64 groupId) external view returns (bool);

    /// @notice A PKP (reverts `PkpNotInAccount(pkpId, 0)` when unknown).
    function getPkp(bytes32 pkpId) external view returns (PkpInfo memory);

    /// @notice A page of an account's PKPs in creation order, and their total.
    function listPkps(
        uint64 accountId,
        uint256 offset,
        uint256 limit
    ) external view returns (PkpInfo[] memory items, uint256 total);

    /// @notice A live group (reverts `UnknownGroup`).
    function getGroup(uint64 accountId, uint64 groupId) external view returns (GroupInfo memory);

    /// @notice A page of an account's live groups, and their total.
    function listGroups(
        uint64 accountId,
        uint256 offset,
        uint256 limit
    ) external view returns (GroupInfo[] memory items, uint256 total);

    /// @notice Whether `pkpId` is a member of the live group `groupId` of `accountId` (reverts `UnknownGroup`).
    function isPkpInGroup(uint64 accountId, uint64 groupId, bytes32 pkpId) external view returns (bool);
    /// @notice Whether the CID with keccak256 `cidHash` is listed in the live group `groupId` of `accountId`
    /// (reverts `UnknownGroup`).
    function isActionInGroup(uint64 accountId, uint64 groupId, bytes32 cidHash) external view returns (bool);
    /// @notice The group's policy CID hash (the same hash addAction uses for CIDs), or zero when it has none.
    /// A group that is not live (deleted, or never created) has none: its policy ended with it.
    function groupPolicy(uint64 accountId, uint64 groupId) external view returns (bytes32 cidHash);

    /// @notice Whether the live key `key` holds execute on some group that lists both `cidHash` and `pkpId`.
    /// An account's owner is answered too: it may execute in every group of its account (docs/background.md §5.4).
    function canExecute(address key, bytes32 cidHash, bytes32 pkpId) external view returns (bool);

    /// @notice Whether the live key `key` holds execute on some group that lists `cidHash` (no PKP needed).
    /// An account's owner is answered too, as for `canExecute`.
    function canExecuteAction(address key, bytes32 cidHash) external view returns (bool);

    /**
     * @notice The registry's layout version: 3 for this one (names, CID strings and member lists in events
     * only; removal events index the account only). Version 2 had the same views with other removal event
     * topics; the first registry (version 1) has no such function. A service refuses a data folder whose
     * registry answers another version, since its views and events would be misread.
     */
    function registryVersion() external pure returns (uint256);

    /// @notice The address PKP ids are bound to: pkpId = keccak256(abi.encode(chainid, pkpIdDomain(),
    /// accountId, counter)). The registry's own address, unless it was deployed to continue an older
    /// registry's accounts (a migration), whose PKPs then keep their ids and keys.
    function pkpIdDomain() external view returns (address);


    /// @notice The trusted ERC-2771 forwarder (path A).
    function forwarder() external view returns (address);
}
