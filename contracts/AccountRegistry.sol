// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC2771Context} from "@openzeppelin/contracts/metatx/ERC2771Context.sol";
import {IAccountRegistry} from "./interfaces/IAccountRegistry.sol";
import {CidSet} from "./libraries/CidSet.sol";
import {PkpBitmap} from "./libraries/PkpBitmap.sol";
import {ScopeMasks} from "./libraries/ScopeMasks.sol";

/**
 * @title AccountRegistry
 * @notice The Sigil permission registry (docs/contracts.md). Non-upgradeable and
 * without an admin: nobody but an account's owner can change what that account's keys may do.
 * @dev Every write resolves the account from `_msgSender()`: the owner of an account, or a live usage key of it.
 * Path A reaches the same functions through the one trusted ERC-2771 forwarder, so `_msgSender()` is the
 * signer of the forwarded request and the scopes are enforced here, not in the relayer.
 */
contract AccountRegistry is IAccountRegistry, ERC2771Context {
    using CidSet for CidSet.Set;
    using PkpBitmap for PkpBitmap.Bitmap;

    // ------------------------------------------------------------------------------------------------
    // Bounds: every write touches a bounded number of slots, every view a bounded number of items.
    // ------------------------------------------------------------------------------------------------

    /// @notice The layout version `registryVersion` answers.
    uint256 public constant REGISTRY_VERSION = 3;

    /// @notice Maximum number of ids in one `KeyScopes` array.
    uint256 public constant MAX_SCOPE_ENTRIES = 64;
    /// @notice Maximum number of ids in the four `KeyScopes` arrays together (bounds the writes of one
    /// addKey/updateKey: at most 128 mask slots).
    uint256 public constant MAX_SCOPE_ENTRIES_PER_KEY = 128;
    /// @notice Maximum number of items in one batch (`addActions`, `addPkps`, ... and createGroup's members).
    uint256 public constant MAX_BATCH = 64;
    /// @notice Maximum number of PKPs in one group.
    uint256 public constant MAX_PKPS_PER_GROUP = 256;
    /// @notice Maximum number of action CIDs in one group.
    uint256 public constant MAX_ACTIONS_PER_GROUP = 256;
    /// @notice Maximum number of live groups per account (bounds the wildcard scan of `canExecute`).
    uint256 public constant MAX_GROUPS_PER_ACCOUNT = 1024;
    /// @notice Maximum `limit` of a paginated view.
    uint256 public constant MAX_PAGE_SIZE = 100;
    /// @notice Maximum length of a CID string, in bytes.
    uint256 public constant MAX_CID_BYTES = 128;
    /// @notice Maximum length of a name or description, in bytes.
    uint256 public constant MAX_STRING_BYTES = 256;
    /// @notice Longest overlap of a rotation (`rotateKey`): 30 days, in seconds.
    uint64 public constant MAX_ROTATION_OVERLAP = 30 days;

    // ------------------------------------------------------------------------------------------------
    // Storage. What a check or a verifier's view needs lives here, packed; what only a reader needs (names
    // and descriptions of keys and groups, key hashes, CID strings, member lists) is carried in calldata and
    // events only, and rebuilt from the logs by the relayer's permission cache and the Safe tool.
    // ------------------------------------------------------------------------------------------------

    uint8 private constant ROLE_OWNER = 1;
    uint8 private constant ROLE_MASTER_KEY = 2;
    uint8 private constant ROLE_KEY = 3;

    uint8 private constant FLAG_CREATE_GROUPS = 1;
    uint8 private constant FLAG_DELETE_GROUPS = 2;
    uint8 private constant FLAG_CREATE_PKPS = 4;

    /**
     * @dev What an address is, in one slot: an account's owner, its master key, or a usage key (with its
     * expiration, registration time, account-wide scope flags and scope epoch). An address holds one role at
     * most, so resolving a caller is a single read.
     */
    struct Role {
        uint8 kind;
        uint64 accountId;
        uint64 expiration;
        uint40 createdAt;
        uint8 flags;
        uint64 scopeEpoch;
    }

    struct AccountRecord {
        // slot 0: everything a group or PKP write updates
        address owner;
        uint32 groupCount;
        uint32 pkpCount;
        // slot 1
        address masterKey;
        uint64 keyCount;
        // slot 2
        address pendingOwner;
        string name;
    }

    /// @dev A group in one slot; `position` is its index in the account's live-group list. Its PKP count lives
    /// in its PKP bitmap (see `_pkpBits`), its CID count in its CID set (see `_actionSets`).
    struct GroupRecord {
        bool live;
        uint16 position;
    }

    /// @dev `index` is the PKP's per-account counter (from 1): its bit in a group's PKP bitmap.
    struct PkpRecord {
        uint64 accountId;
        uint32 index;
        string name;
        string description;
    }

    uint64 private _accountCount;
    /// @dev The last scope epoch handed out (see ScopeMasks): registry-wide, never repeats.
    uint64 private _scopeEpochs;

    mapping(address addr => Role) private _roles;
    mapping(uint64 accountId => AccountRecord) private _accounts;
    mapping(address key => mapping(uint64 groupId => uint256 word)) private _masks;
    /// @dev keccak256 of the scopes a key's masks were last written from: an update with the same scopes
    /// writes no mask at all.
    mapping(address key => bytes32 scopesHash) private _scopesHashes;

    mapping(bytes32 pkpId => PkpRecord) private _pkps;

    mapping(uint64 accountId => mapping(uint64 groupId => GroupRecord)) private _groups;
    /**
     * @dev The live groups of an account, packed four to a slot: element 0 is their number, elements 1..n
     * their ids (the group at position p is element p + 1). Keeping the number beside the first three ids
     * lets deleteGroup and canExecute in an account with few groups touch one slot for both.
     */
    mapping(uint64 accountId => uint64[MAX_GROUPS_PER_ACCOUNT + 1]) private _liveGroupIds;
    /**
     * @dev PKP membership and count of a group, by the PKP's per-account index (see PkpBitmap). Group ids are
     * never reused, so the bits of a deleted group need no wiping: every check asks whether the group is
     * live, and a removal, which skips that read when it finds its bit, relies on the bitmap's deletion mark
     * (set by deleteGroup) instead.
     */
    mapping(uint64 accountId => mapping(uint64 groupId => PkpBitmap.Bitmap)) private _pkpBits;
    /**
     * @dev A group's action CIDs by hash, and their count word (see CidSet). deleteGroup clears the word and
     * leaves the hashes (same reasoning as for PKPs). The word is non-zero for a live group until it loses
     * its last CID: a non-zero word tells a CID write that the group is live without reading the group
     * record (a cold slot saved), and a removal that finds its CID and a non-zero word needs no other slot.
     * A zero word sends the write to the record.
     */
    mapping(uint64 accountId => mapping(uint64 groupId => CidSet.Set)) private _actionSets;

    /**
     * @dev A group's signing policy: keccak256 of its CID string, or zero for none. A slot of its own: the hash
     * fills a word, and the group's other words are written by other operations. deleteGroup leaves it in
     * place (group ids are never reused); `groupPolicy` answers zero for a group that is not live.
     */
    mapping(uint64 accountId => mapping(uint64 groupId => bytes32 cidHash)) private _policies;

    /**
     * @dev The address PKP ids are bound to (see createPkp): this registry's own, or, for a registry that
     * takes over an older registry's accounts (scripts/migrate), the older one's, so that every PKP keeps its
     * id, and with it its key (the enclave derives a PKP's key from its id).
     */
    address private immutable _pkpIdDomain;

    /// @param trustedForwarder_ The only ERC-2771 forwarder whose appended sender is believed (path A).
    /// @param pkpIdDomain_ Zero for a fresh registry (its PKP ids are bound to its own address), or the
    /// address of the registry whose PKP ids this one continues (a migration).
    constructor(address trustedForwarder_, address pkpIdDomain_) ERC2771Context(trustedForwarder_) {
        if (trustedForwarder_ == address(0)) revert ZeroAddress();
        _pkpIdDomain = pkpIdDomain_ == address(0) ? address(this) : pkpIdDomain_;
    }

    // ------------------------------------------------------------------------------------------------
    // Accounts
    // ------------------------------------------------------------------------------------------------

    /// @inheritdoc IAccountRegistry
    function createAccount(string calldata name, address masterKey) external returns (uint64 accountId) {
        address sender = _msgSender();
        _requireUnused(sender);
        if (masterKey != address(0)) {
            if (masterKey == sender) revert AddressInUse(masterKey);
            _requireUnused(masterKey);
        }
        _checkString(name);

        accountId = ++_accountCount;
        AccountRecord storage account = _accounts[accountId];
        account.owner = sender;
        if (masterKey != address(0)) {
            account.masterKey = masterKey;
            _roles[masterKey] = Role(ROLE_MASTER_KEY, accountId, 0, 0, 0, 0);
        }
        if (bytes(name).length != 0) account.name = name;
        _roles[sender] = Role(ROLE_OWNER, accountId, 0, 0, 0, 0);
        emit AccountCreated(accountId, sender, masterKey, name);
    }

    /// @inheritdoc IAccountRegistry
    function transferOwnership(address newOwner) external {
        (, uint64 accountId) = _requireOwner();
        if (newOwner == address(0)) revert ZeroAddress();
        _requireUnused(newOwner);
        AccountRecord storage account = _accounts[accountId];
        account.pendingOwner = newOwner;
        emit OwnershipTransferStarted(accountId, account.owner, newOwner);
    }

    /// @inheritdoc IAccountRegistry
    function cancelOwnershipTransfer() external {
        (, uint64 accountId) = _requireOwner();
        AccountRecord storage account = _accounts[accountId];
        address pending = account.pendingOwner;
        if (pending == address(0)) revert NoPendingTransfer(accountId);
        account.pendingOwner = address(0);
        emit OwnershipTransferCanceled(accountId, pending);
    }

    /// @inheritdoc IAccountRegistry
    function acceptOwnership(uint64 accountId) external {
        address sender = _msgSender();
        AccountRecord storage account = _requireAccount(accountId);
        address pending = account.pendingOwner;
        if (pending == address(0)) revert NoPendingTransfer(accountId);
        if (sender != pending) revert NotPendingOwner(sender, accountId);
        // The pending owner may have taken another role since the proposal.
        _requireUnused(sender);

        address previousOwner = account.owner;
        delete _roles[previousOwner];
        _roles[sender] = Role(ROLE_OWNER, accountId, 0, 0, 0, 0);
        account.owner = sender;
        account.pendingOwner = address(0);
        emit OwnershipTransferred(accountId, previousOwner, sender);
    }

    // ------------------------------------------------------------------------------------------------
    // Usage keys (owner only)
    // ------------------------------------------------------------------------------------------------

    /**
     * @inheritdoc IAccountRegistry
     * @dev `keyHash`, `name` and `description` are only emitted (KeyAdded), not stored.
     */
    function addKey(
        address key,
        bytes32 keyHash,
        string calldata name,
        string calldata description,
        uint64 expiration,
        KeyScopes calldata scopes
    ) external {
        (, uint64 accountId) = _requireOwner();
        if (key == address(0)) revert ZeroAddress();
        _requireUnused(key);
        _checkKeyFields(accountId, name, description, expiration, scopes);

        uint64 epoch = ++_scopeEpochs;
        _roles[key] = Role(ROLE_KEY, accountId, expiration, uint40(block.timestamp), _flagsOf(scopes), epoch);
        _writeMasks(key, epoch, scopes);
        _scopesHashes[key] = keccak256(abi.encode(scopes));
        ++_accounts[accountId].keyCount;
        emit KeyAdded(accountId, key, keyHash, name, description, expiration, scopes);
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev Unchanged scopes (same flags and the same four arrays, in the same order) keep the key's masks as
     * they are. Otherwise a fresh scope epoch retires every mask the key held and only the new ones are
     * written. Both paths validate the ids first, so naming a deleted group is refused either way.
     */
    function updateKey(
        address key,
        string calldata name,
        string calldata description,
        uint64 expiration,
        KeyScopes calldata scopes
    ) external {
        (, uint64 accountId) = _requireOwner();
        Role storage role = _requireLiveKeyOf(accountId, key);
        _checkKeyFields(accountId, name, description, expiration, scopes);

        role.expiration = expiration;
        bytes32 scopesHash = keccak256(abi.encode(scopes));
        if (scopesHash != _scopesHashes[key]) {
            uint64 epoch = ++_scopeEpochs;
            role.flags = _flagsOf(scopes);
            role.scopeEpoch = epoch;
            _writeMasks(key, epoch, scopes);
            _scopesHashes[key] = scopesHash;
        }
        emit KeyUpdated(accountId, key, name, description, expiration, scopes);
    }

    /// @inheritdoc IAccountRegistry
    function updateKeyMetadata(address key, string calldata name, string calldata description) external {
        (, uint64 accountId) = _requireOwner();
        _requireLiveKeyOf(accountId, key);
        _checkString(name);
        _checkString(description);
        emit KeyMetadataUpdated(accountId, key, name, description);
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev Also accepts an expired key, so the owner can free its address. Its masks stay behind under an
     * epoch no later registration of the address can take.
     */
    function removeKey(address key) external {
        (, uint64 accountId) = _requireOwner();
        Role storage role = _roles[key];
        if (role.kind != ROLE_KEY || role.accountId != accountId) revert UnknownKey(key);

        delete _roles[key];
        --_accounts[accountId].keyCount;
        emit KeyRemoved(accountId, key);
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev One transaction, so the new key never exists without the old one's end being set. The scopes are
     * checked against the hash the old key's masks were written from, not against the live groups: they are
     * a copy of scopes the registry accepted, and an entry naming a group deleted since grants nothing
     * (group ids are never reused), so the new key holds exactly what the old one holds.
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
    ) external {
        (, uint64 accountId) = _requireOwner();
        Role storage old = _requireLiveKeyOf(accountId, oldKey);
        if (overlap > MAX_ROTATION_OVERLAP) revert OverlapTooLong(overlap, MAX_ROTATION_OVERLAP);
        bytes32 scopesHash = keccak256(abi.encode(scopes));
        if (scopesHash != _scopesHashes[oldKey]) revert ScopesMismatch(oldKey);
        if (newKey == address(0)) revert ZeroAddress();
        _requireUnused(newKey);
        _checkString(name);
        _checkString(description);
        if (newExpiration != 0 && newExpiration <= block.timestamp) revert ExpirationInPast(newExpiration);

        uint64 epoch = ++_scopeEpochs;
        _roles[newKey] = Role(ROLE_KEY, accountId, newExpiration, uint40(block.timestamp), old.flags, epoch);
        _writeMasks(newKey, epoch, scopes);
        _scopesHashes[newKey] = scopesHash;
        ++_accounts[accountId].keyCount;
        emit KeyAdded(accountId, newKey, newKeyHash, name, description, newExpiration, scopes);

        uint64 until = uint64(block.timestamp) + overlap;
        if (old.expiration == 0 || until < old.expiration) old.expiration = until;
        emit KeyUpdated(accountId, oldKey, name, description, old.expiration, scopes);
    }

    // ------------------------------------------------------------------------------------------------
    // PKPs and groups
    // ------------------------------------------------------------------------------------------------

    /**
     * @inheritdoc IAccountRegistry
     * @dev pkpId = keccak256(abi.encode(chainid, pkpIdDomain, accountId, counter)) with a per-account counter
     * from 1: unique across accounts, registries (each its own domain, unless it continues another's) and
     * chains, and never zero (a zero hash is computationally infeasible).
     */
    function createPkp(string calldata name, string calldata description) external returns (bytes32 pkpId) {
        uint64 accountId = _authorize(Scope.CreatePkp, 0);
        _checkString(name);
        _checkString(description);

        uint32 index = ++_accounts[accountId].pkpCount;
        pkpId = _pkpIdOf(accountId, index);
        PkpRecord storage record = _pkps[pkpId];
        record.accountId = accountId;
        record.index = index;
        if (bytes(name).length != 0) record.name = name;
        if (bytes(description).length != 0) record.description = description;
        emit PkpCreated(accountId, pkpId, name, description);
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev `name` and `description` are only emitted (GroupCreated), not stored.
     */
    function createGroup(
        string calldata name,
        string calldata description,
        bytes32[] calldata pkpIds,
        string[] calldata cids
    ) external returns (uint64 groupId) {
        (address caller, uint64 accountId, Role memory role) = _caller();
        _requireScope(caller, accountId, role, Scope.CreateGroup, 0);
        _checkBatch(pkpIds.length);
        _checkBatch(cids.length);
        groupId = _newGroup(accountId, name, description);

        // Initial members only where the caller could add them afterwards: for a key, that is the wildcard,
        // since a scope array can only name groups that already existed.
        if (pkpIds.length != 0) _requireScope(caller, accountId, role, Scope.AddPkp, groupId);
        if (cids.length != 0) _requireScope(caller, accountId, role, Scope.ManageActions, groupId);
        for (uint256 i = 0; i < pkpIds.length; ++i) {
            _addPkp(accountId, groupId, pkpIds[i]);
        }
        // The word is written even without CIDs: NO_CID_YET pays the slot now, for the first addAction.
        CidSet.Set storage actions = _actionSets[accountId][groupId];
        uint256 actionWord = CidSet.NO_CID_YET;
        for (uint256 i = 0; i < cids.length; ++i) {
            actionWord = _addAction(accountId, groupId, actions, actionWord, cids[i]);
        }
        actions.word = actionWord;
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev Constant cost whatever the group holds: the id is never reused, so its members are left in
     * storage where nothing reads them, and the last live group takes its place in the live list.
     */
    function deleteGroup(uint64 groupId) external {
        uint64 accountId = _authorize(Scope.DeleteGroup, 0);
        GroupRecord storage group = _requireGroup(accountId, groupId);

        uint64[MAX_GROUPS_PER_ACCOUNT + 1] storage live = _liveGroupIds[accountId];
        uint16 position = group.position;
        uint64 last;
        // Swap-remove. The group is live, so the count is at least one, and every position is below
        // MAX_GROUPS_PER_ACCOUNT: nothing here can wrap.
        unchecked {
            last = live[0] - 1;
            if (position != last) {
                uint64 moved = live[last + 1];
                live[position + 1] = moved;
                _groups[accountId][moved].position = position;
            }
        }
        live[0] = last;
        delete _groups[accountId][groupId];
        // A CID write trusts a non-zero action word to mean a live group (see `_actionSets`).
        _actionSets[accountId][groupId].clear();
        // Removing a PKP does not read the group record when it finds its bit, so the bitmap is marked
        // where that removal looks.
        _pkpBits[accountId][groupId].markDeleted();
        emit GroupDeleted(accountId, groupId);
    }

    /// @inheritdoc IAccountRegistry
    function addAction(uint64 groupId, string calldata cid) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        CidSet.Set storage actions = _actionSets[accountId][groupId];
        uint256 word = _liveActionWord(accountId, groupId, actions);
        actions.word = _addAction(accountId, groupId, actions, word, cid);
    }

    /// @inheritdoc IAccountRegistry
    function removeAction(uint64 groupId, string calldata cid) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        // Liveness is checked inside, where the CID or the action word is missing (see _removeAction).
        CidSet.Set storage actions = _actionSets[accountId][groupId];
        actions.word = _removeAction(accountId, groupId, actions, actions.word, cid);
    }

    /// @inheritdoc IAccountRegistry
    function addActions(uint64 groupId, string[] calldata cids) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        CidSet.Set storage actions = _actionSets[accountId][groupId];
        uint256 word = _liveActionWord(accountId, groupId, actions);
        _checkBatch(cids.length);
        for (uint256 i = 0; i < cids.length; ++i) {
            word = _addAction(accountId, groupId, actions, word, cids[i]);
        }
        actions.word = word;
    }

    /// @inheritdoc IAccountRegistry
    function removeActions(uint64 groupId, string[] calldata cids) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        _requireGroup(accountId, groupId);
        _checkBatch(cids.length);
        CidSet.Set storage actions = _actionSets[accountId][groupId];
        uint256 word = actions.word;
        for (uint256 i = 0; i < cids.length; ++i) {
            word = _removeAction(accountId, groupId, actions, word, cids[i]);
        }
        actions.word = word;
    }

    /// @inheritdoc IAccountRegistry
    function addPkp(uint64 groupId, bytes32 pkpId) external {
        uint64 accountId = _authorize(Scope.AddPkp, groupId);
        _requireGroup(accountId, groupId);
        _addPkp(accountId, groupId, pkpId);
    }

    /// @inheritdoc IAccountRegistry
    function removePkp(uint64 groupId, bytes32 pkpId) external {
        uint64 accountId = _authorize(Scope.RemovePkp, groupId);
        // Liveness is checked inside, where the PKP is not found (see _removePkp).
        _removePkp(accountId, groupId, pkpId);
    }

    /// @inheritdoc IAccountRegistry
    function addPkps(uint64 groupId, bytes32[] calldata pkpIds) external {
        uint64 accountId = _authorize(Scope.AddPkp, groupId);
        _requireGroup(accountId, groupId);
        _checkBatch(pkpIds.length);
        for (uint256 i = 0; i < pkpIds.length; ++i) {
            _addPkp(accountId, groupId, pkpIds[i]);
        }
    }

    /// @inheritdoc IAccountRegistry
    function removePkps(uint64 groupId, bytes32[] calldata pkpIds) external {
        uint64 accountId = _authorize(Scope.RemovePkp, groupId);
        _requireGroup(accountId, groupId);
        _checkBatch(pkpIds.length);
        for (uint256 i = 0; i < pkpIds.length; ++i) {
            _removePkp(accountId, groupId, pkpIds[i]);
        }
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev Only the hash is stored; the CID string is in the event, like an action's. Setting the policy a
     * group already has is accepted (and emitted again), so a retried write never fails.
     */
    function setGroupPolicy(uint64 groupId, string calldata cid) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        _requireGroup(accountId, groupId);
        uint256 length = bytes(cid).length;
        if (length > MAX_CID_BYTES) revert CidTooLong(length, MAX_CID_BYTES);
        bytes32 cidHash = length == 0 ? bytes32(0) : _hashOf(cid);
        _policies[accountId][groupId] = cidHash;
        emit GroupPolicySet(accountId, groupId, cidHash, cid);
    }

    // ------------------------------------------------------------------------------------------------
    // Views
    // ------------------------------------------------------------------------------------------------

    /// @inheritdoc IAccountRegistry
    function getAccount(uint64 accountId) external view returns (Account memory) {
        AccountRecord storage account = _requireAccount(accountId);
        return
            Account({
                id: accountId,
                owner: account.owner,
                pendingOwner: account.pendingOwner,
                masterKey: account.masterKey,
                name: account.name,
                groupCount: account.groupCount,
                pkpCount: account.pkpCount,
                keyCount: account.keyCount
            });
    }

    /// @inheritdoc IAccountRegistry
    function accountOfOwner(address owner) external view returns (uint64) {
        Role storage role = _roles[owner];
        return role.kind == ROLE_OWNER ? role.accountId : 0;
    }

    /// @inheritdoc IAccountRegistry
    function accountOfMasterKey(address masterKey) external view returns (uint64) {
        Role storage role = _roles[masterKey];
        return role.kind == ROLE_MASTER_KEY ? role.accountId : 0;
    }

    /// @inheritdoc IAccountRegistry
    function accountOfKey(address key) external view returns (uint64) {
        Role memory role = _roles[key];
        return _isLiveKey(role) ? role.accountId : 0;
    }

    /// @inheritdoc IAccountRegistry
    function getKey(address key) external view returns (KeyInfo memory) {
        Role memory role = _roles[key];
        if (!_isLiveKey(role)) revert UnknownKey(key);
        return
            KeyInfo({
                key: key,
                accountId: role.accountId,
                expiration: role.expiration,
                createdAt: role.createdAt,
                scopes: KeyScopes({
                    canCreateGroups: role.flags & FLAG_CREATE_GROUPS != 0,
                    canDeleteGroups: role.flags & FLAG_DELETE_GROUPS != 0,
                    canCreatePkps: role.flags & FLAG_CREATE_PKPS != 0,
                    manageIpfsIdsInGroups: _groupsWith(key, role, ScopeMasks.MANAGE_ACTIONS),
                    addPkpToGroups: _groupsWith(key, role, ScopeMasks.ADD_PKP),
                    removePkpFromGroups: _groupsWith(key, role, ScopeMasks.REMOVE_PKP),
                    executeInGroups: _groupsWith(key, role, ScopeMasks.EXECUTE)
                })
            });
    }

    /// @inheritdoc IAccountRegistry
    function hasScope(address key, Scope scope, uint64 groupId) external view returns (bool) {
        Role memory role = _roles[key];
        if (!_isLiveKey(role)) return false;
        return _holds(key, role, scope, groupId);
    }

    /// @inheritdoc IAccountRegistry
    function getPkp(bytes32 pkpId) external view returns (PkpInfo memory) {
        PkpRecord storage record = _pkps[pkpId];
        if (record.accountId == 0) revert PkpNotInAccount(pkpId, 0);
        return PkpInfo({id: pkpId, accountId: record.accountId, name: record.name, description: record.description});
    }

    /// @inheritdoc IAccountRegistry
    function listPkps(
        uint64 accountId,
        uint256 offset,
        uint256 limit
    ) external view returns (PkpInfo[] memory items, uint256 total) {
        total = _accounts[accountId].pkpCount;
        (uint256 start, uint256 end) = _page(total, offset, limit);
        items = new PkpInfo[](end - start);
        for (uint256 i = start; i < end; ++i) {
            bytes32 pkpId = _pkpIdOf(accountId, i + 1);
            PkpRecord storage record = _pkps[pkpId];
            items[i - start] = PkpInfo({
                id: pkpId,
                accountId: accountId,
                name: record.name,
                description: record.description
            });
        }
    }

    /// @inheritdoc IAccountRegistry
    function getGroup(uint64 accountId, uint64 groupId) external view returns (GroupInfo memory) {
        _requireGroup(accountId, groupId);
        return _groupInfo(accountId, groupId);
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev Groups are in creation order, except that deleting a group moves the last one into its place.
     */
    function listGroups(
        uint64 accountId,
        uint256 offset,
        uint256 limit
    ) external view returns (GroupInfo[] memory items, uint256 total) {
        uint64[MAX_GROUPS_PER_ACCOUNT + 1] storage live = _liveGroupIds[accountId];
        total = live[0];
        (uint256 start, uint256 end) = _page(total, offset, limit);
        items = new GroupInfo[](end - start);
        for (uint256 i = start; i < end; ++i) {
            items[i - start] = _groupInfo(accountId, live[i + 1]);
        }
    }

    /// @inheritdoc IAccountRegistry
    function isPkpInGroup(uint64 accountId, uint64 groupId, bytes32 pkpId) external view returns (bool) {
        _requireGroup(accountId, groupId);
        PkpRecord storage pkp = _pkps[pkpId];
        return pkp.accountId == accountId && _pkpBits[accountId][groupId].contains(pkp.index);
    }

    /// @inheritdoc IAccountRegistry
    function isActionInGroup(uint64 accountId, uint64 groupId, bytes32 cidHash) external view returns (bool) {
        _requireGroup(accountId, groupId);
        return _actionSets[accountId][groupId].contains(cidHash);
    }

    /// @inheritdoc IAccountRegistry
    function groupPolicy(uint64 accountId, uint64 groupId) external view returns (bytes32 cidHash) {
        if (!_groups[accountId][groupId].live) return bytes32(0);
        return _policies[accountId][groupId];
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev The owner of an account is also answered: it may execute in every group of its account.
     */
    function canExecute(address key, bytes32 cidHash, bytes32 pkpId) external view returns (bool) {
        return _canExecute(key, cidHash, pkpId, true);
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev The owner of an account is also answered, as for `canExecute`.
     */
    function canExecuteAction(address key, bytes32 cidHash) external view returns (bool) {
        return _canExecute(key, cidHash, 0, false);
    }

    /// @inheritdoc IAccountRegistry
    function registryVersion() external pure returns (uint256) {
        return REGISTRY_VERSION;
    }

    /// @inheritdoc IAccountRegistry
    function pkpIdDomain() external view returns (address) {
        return _pkpIdDomain;
    }

    /// @inheritdoc IAccountRegistry
    function forwarder() external view returns (address) {
        return trustedForwarder();
    }

    // ------------------------------------------------------------------------------------------------
    // Authorization
    // ------------------------------------------------------------------------------------------------

    /// @dev The caller, its account and its role (owner or live key). Reverts for anyone else.
    function _caller() private view returns (address caller, uint64 accountId, Role memory role) {
        caller = _msgSender();
        role = _roles[caller];
        accountId = role.accountId;
        if (role.kind == ROLE_OWNER) return (caller, accountId, role);
        // A master key has no power on chain: it is refused like an unknown address.
        if (role.kind != ROLE_KEY) revert NoAccount(caller);
        if (_isExpired(role)) revert KeyExpired(caller, role.expiration);
    }

    /// @dev Owner-only operations: every key is refused, whatever it holds.
    function _requireOwner() private view returns (address caller, uint64 accountId) {
        Role memory role;
        (caller, accountId, role) = _caller();
        if (role.kind != ROLE_OWNER) revert NotOwner(caller, accountId);
    }

    /// @dev The caller's account, if the caller is its owner or a live key holding `scope` on `groupId`.
    function _authorize(Scope scope, uint64 groupId) private view returns (uint64 accountId) {
        address caller;
        Role memory role;
        (caller, accountId, role) = _caller();
        _requireScope(caller, accountId, role, scope, groupId);
    }

    /// @dev The write-side check; `_holds` is the same rule as the view `hasScope` answers.
    function _requireScope(
        address caller,
        uint64 accountId,
        Role memory role,
        Scope scope,
        uint64 groupId
    ) private view {
        if (role.kind == ROLE_OWNER) return;
        if (!_holds(caller, role, scope, groupId)) revert MissingScope(caller, accountId, scope, groupId);
    }

    /**
     * @dev Whether the live key holds `scope`: an account-wide scope from its flags (whatever `groupId`); a
     * per-group scope through the wildcard or its own mask, and only on a live group of its account. Group id
     * 0 asks about the wildcard itself.
     */
    function _holds(address key, Role memory role, Scope scope, uint64 groupId) private view returns (bool) {
        if (scope == Scope.CreatePkp) return role.flags & FLAG_CREATE_PKPS != 0;
        if (scope == Scope.CreateGroup) return role.flags & FLAG_CREATE_GROUPS != 0;
        if (scope == Scope.DeleteGroup) return role.flags & FLAG_DELETE_GROUPS != 0;
        uint8 bit = ScopeMasks.bitOf(scope);
        uint8 bits = _maskBits(key, role, ScopeMasks.WILDCARD);
        if (groupId == ScopeMasks.WILDCARD) return bits & bit != 0;
        if (!_groups[role.accountId][groupId].live) return false;
        return (bits | _maskBits(key, role, groupId)) & bit != 0;
    }

    function _maskBits(address key, Role memory role, uint64 groupId) private view returns (uint8) {
        return ScopeMasks.bitsAt(_masks[key][groupId], role.scopeEpoch);
    }

    function _isExpired(Role memory role) private view returns (bool) {
        return role.expiration != 0 && block.timestamp >= role.expiration;
    }

    function _isLiveKey(Role memory role) private view returns (bool) {
        return role.kind == ROLE_KEY && !_isExpired(role);
    }

    /// @dev An address is at most one of: an owner, a master key, a usage key (expired or not).
    function _requireUnused(address addr) private view {
        if (_roles[addr].kind != 0) revert AddressInUse(addr);
    }

    function _requireAccount(uint64 accountId) private view returns (AccountRecord storage account) {
        if (accountId == 0 || accountId > _accountCount) revert UnknownAccount(accountId);
        return _accounts[accountId];
    }

    function _requireGroup(uint64 accountId, uint64 groupId) private view returns (GroupRecord storage group) {
        group = _groups[accountId][groupId];
        if (!group.live) revert UnknownGroup(accountId, groupId);
    }

    /// @dev A key of `accountId` that is not expired. Removed keys and other accounts' keys are unknown.
    function _requireLiveKeyOf(uint64 accountId, address key) private view returns (Role storage role) {
        role = _roles[key];
        if (role.kind != ROLE_KEY || role.accountId != accountId) revert UnknownKey(key);
        if (role.expiration != 0 && block.timestamp >= role.expiration) revert KeyExpired(key, role.expiration);
    }

    // ------------------------------------------------------------------------------------------------
    // Writes
    // ------------------------------------------------------------------------------------------------

    function _flagsOf(KeyScopes calldata scopes) private pure returns (uint8 flags) {
        if (scopes.canCreateGroups) flags |= FLAG_CREATE_GROUPS;
        if (scopes.canDeleteGroups) flags |= FLAG_DELETE_GROUPS;
        if (scopes.canCreatePkps) flags |= FLAG_CREATE_PKPS;
    }

    /// @dev Grants the four per-group scopes under `epoch`. Duplicate ids are harmless.
    function _writeMasks(address key, uint64 epoch, KeyScopes calldata scopes) private {
        mapping(uint64 => uint256) storage masks = _masks[key];
        _grant(masks, epoch, scopes.executeInGroups, ScopeMasks.EXECUTE);
        _grant(masks, epoch, scopes.manageIpfsIdsInGroups, ScopeMasks.MANAGE_ACTIONS);
        _grant(masks, epoch, scopes.addPkpToGroups, ScopeMasks.ADD_PKP);
        _grant(masks, epoch, scopes.removePkpFromGroups, ScopeMasks.REMOVE_PKP);
    }

    function _grant(
        mapping(uint64 => uint256) storage masks,
        uint64 epoch,
        uint64[] calldata groupIds,
        uint8 bit
    ) private {
        for (uint256 i = 0; i < groupIds.length; ++i) {
            uint64 groupId = groupIds[i];
            masks[groupId] = ScopeMasks.granted(masks[groupId], epoch, bit);
        }
    }

    function _newGroup(
        uint64 accountId,
        string calldata name,
        string calldata description
    ) private returns (uint64 groupId) {
        _checkString(name);
        _checkString(description);
        uint64[MAX_GROUPS_PER_ACCOUNT + 1] storage live = _liveGroupIds[accountId];
        uint64 position = live[0];
        if (position >= MAX_GROUPS_PER_ACCOUNT) revert TooManyGroups(accountId, MAX_GROUPS_PER_ACCOUNT);
        groupId = ++_accounts[accountId].groupCount;
        live[0] = position + 1;
        live[position + 1] = groupId;
        _groups[accountId][groupId] = GroupRecord(true, uint16(position));
        emit GroupCreated(accountId, groupId, name, description);
    }

    /// @dev The action word of a live group: a non-zero word is one (see `_actionSets`); a zero word is
    /// checked against the group record.
    function _liveActionWord(
        uint64 accountId,
        uint64 groupId,
        CidSet.Set storage actions
    ) private view returns (uint256 word) {
        word = actions.word;
        if (word == 0) _requireGroup(accountId, groupId);
    }

    /// @dev Adds `cid` to a live group's CID set whose word is `word`; returns the new word (not written).
    function _addAction(
        uint64 accountId,
        uint64 groupId,
        CidSet.Set storage actions,
        uint256 word,
        string calldata cid
    ) private returns (uint256) {
        uint256 length = bytes(cid).length;
        if (length == 0) revert EmptyCid();
        if (length > MAX_CID_BYTES) revert CidTooLong(length, MAX_CID_BYTES);
        bytes32 cidHash = _hashOf(cid);
        uint256 next = actions.add(word, cidHash, MAX_ACTIONS_PER_GROUP);
        if (next == CidSet.REFUSED) {
            if (CidSet.sizeOf(word) >= MAX_ACTIONS_PER_GROUP) revert TooManyMembers(groupId, MAX_ACTIONS_PER_GROUP);
            revert ActionAlreadyInGroup(groupId, cid);
        }
        emit ActionAdded(accountId, groupId, cidHash, cid);
        return next;
    }

    /**
     * @dev Removes `cid` from a group's CID set whose word is `word`; returns the new word (not written). The
     * group record is not read when the CID is found with a non-zero word: a CID can only have been added
     * while the group was live, and deleteGroup clears the word.
     */
    function _removeAction(
        uint64 accountId,
        uint64 groupId,
        CidSet.Set storage actions,
        uint256 word,
        string calldata cid
    ) private returns (uint256) {
        bytes32 cidHash = _hashOf(cid);
        uint256 next = actions.remove(word, cidHash);
        if (next == CidSet.REFUSED) {
            // UnknownGroup when the group is not live (checked first, as everywhere), else ActionNotInGroup.
            _requireGroup(accountId, groupId);
            revert ActionNotInGroup(groupId, cid);
        }
        emit ActionRemoved(accountId, groupId, cidHash);
        return next;
    }

    function _addPkp(uint64 accountId, uint64 groupId, bytes32 pkpId) private {
        PkpRecord storage pkp = _pkps[pkpId];
        if (pkp.accountId != accountId) revert PkpNotInAccount(pkpId, accountId);
        PkpBitmap.Bitmap storage pkps = _pkpBits[accountId][groupId];
        if (!pkps.add(pkp.index, MAX_PKPS_PER_GROUP)) {
            if (pkps.count() >= MAX_PKPS_PER_GROUP) revert TooManyMembers(groupId, MAX_PKPS_PER_GROUP);
            revert PkpAlreadyInGroup(groupId, pkpId);
        }
        emit PkpAdded(accountId, groupId, pkpId);
    }

    /**
     * @dev The group record is not read when the PKP is found (a cold slot saved): a bit can only have been
     * set while the group was live, and the bitmap of a group deleted while holding PKPs is marked deleted.
     */
    function _removePkp(uint64 accountId, uint64 groupId, bytes32 pkpId) private {
        PkpRecord storage pkp = _pkps[pkpId];
        (uint64 owner, uint256 index) = (pkp.accountId, pkp.index);
        if (owner != accountId) _refuseRemoval(accountId, groupId, pkpId);
        PkpBitmap.Bitmap storage pkps = _pkpBits[accountId][groupId];
        if (!pkps.remove(index)) {
            if (pkps.isDeleted()) revert UnknownGroup(accountId, groupId);
            _refuseRemoval(accountId, groupId, pkpId);
        }
        emit PkpRemoved(accountId, groupId, pkpId);
    }

    /// @dev Always reverts: UnknownGroup when the group is not live (checked first, as everywhere), else
    /// PkpNotInGroup.
    function _refuseRemoval(uint64 accountId, uint64 groupId, bytes32 pkpId) private view {
        _requireGroup(accountId, groupId);
        revert PkpNotInGroup(groupId, pkpId);
    }

    /// @dev keccak256 of a calldata string, hashed in scratch memory past the free pointer (which it leaves
    /// as is): the same value as keccak256(bytes(cid)), without the copy's allocation.
    function _hashOf(string calldata cid) private pure returns (bytes32 hash) {
        assembly ("memory-safe") {
            let buffer := mload(0x40)
            calldatacopy(buffer, cid.offset, cid.length)
            hash := keccak256(buffer, cid.length)
        }
    }

    // ------------------------------------------------------------------------------------------------
    // Validation
    // ------------------------------------------------------------------------------------------------

    function _checkString(string calldata value) private pure {
        uint256 length = bytes(value).length;
        if (length > MAX_STRING_BYTES) revert StringTooLong(length, MAX_STRING_BYTES);
    }

    function _checkBatch(uint256 length) private pure {
        if (length > MAX_BATCH) revert TooManyEntries(length, MAX_BATCH);
    }

    function _checkKeyFields(
        uint64 accountId,
        string calldata name,
        string calldata description,
        uint64 expiration,
        KeyScopes calldata scopes
    ) private view {
        _checkString(name);
        _checkString(description);
        if (expiration != 0 && expiration <= block.timestamp) revert ExpirationInPast(expiration);
        uint256 total = scopes.manageIpfsIdsInGroups.length +
            scopes.addPkpToGroups.length +
            scopes.removePkpFromGroups.length +
            scopes.executeInGroups.length;
        if (total > MAX_SCOPE_ENTRIES_PER_KEY) revert TooManyEntries(total, MAX_SCOPE_ENTRIES_PER_KEY);
        _checkScopeGroups(accountId, scopes.manageIpfsIdsInGroups);
        _checkScopeGroups(accountId, scopes.addPkpToGroups);
        _checkScopeGroups(accountId, scopes.removePkpFromGroups);
        _checkScopeGroups(accountId, scopes.executeInGroups);
    }

    /// @dev Every id is the wildcard or a live group of the account, and the array is bounded.
    function _checkScopeGroups(uint64 accountId, uint64[] calldata groupIds) private view {
        if (groupIds.length > MAX_SCOPE_ENTRIES) revert TooManyEntries(groupIds.length, MAX_SCOPE_ENTRIES);
        mapping(uint64 => GroupRecord) storage groups = _groups[accountId];
        for (uint256 i = 0; i < groupIds.length; ++i) {
            uint64 groupId = groupIds[i];
            if (groupId != ScopeMasks.WILDCARD && !groups[groupId].live) {
                revert UnknownGroup(accountId, groupId);
            }
        }
    }

    // ------------------------------------------------------------------------------------------------
    // View helpers
    // ------------------------------------------------------------------------------------------------

    function _pkpIdOf(uint64 accountId, uint256 index) private view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, _pkpIdDomain, accountId, index));
    }

    /// @dev Bounds of a page: [start, end) clipped to `total`.
    function _page(uint256 total, uint256 offset, uint256 limit) private pure returns (uint256 start, uint256 end) {
        if (limit > MAX_PAGE_SIZE) revert PageTooLarge(limit, MAX_PAGE_SIZE);
        start = offset < total ? offset : total;
        end = total - start < limit ? total : start + limit;
    }

    /// @dev The ids holding `bit`: the wildcard first, then live groups in list order (at most 1 + 1024).
    function _groupsWith(address key, Role memory role, uint8 bit) private view returns (uint64[] memory ids) {
        uint64 accountId = role.accountId;
        uint64[MAX_GROUPS_PER_ACCOUNT + 1] storage liveIds = _liveGroupIds[accountId];
        uint256 live = liveIds[0];
        uint64[] memory buffer = new uint64[](live + 1);
        uint256 count = 0;
        if (_maskBits(key, role, ScopeMasks.WILDCARD) & bit != 0) {
            buffer[0] = ScopeMasks.WILDCARD;
            count = 1;
        }
        for (uint256 i = 1; i <= live; ++i) {
            uint64 groupId = liveIds[i];
            if (_maskBits(key, role, groupId) & bit != 0) {
                buffer[count] = groupId;
                ++count;
            }
        }
        ids = new uint64[](count);
        for (uint256 i = 0; i < count; ++i) {
            ids[i] = buffer[i];
        }
    }

    function _groupInfo(uint64 accountId, uint64 groupId) private view returns (GroupInfo memory) {
        return
            GroupInfo({
                id: groupId,
                accountId: accountId,
                pkpCount: _pkpBits[accountId][groupId].count(),
                actionCount: _actionSets[accountId][groupId].count()
            });
    }

    /**
     * @dev Whether some live group of the key's account, on which the key holds execute, lists `cidHash` (and
     * `pkpId` when `withPkp`). An account's owner counts as a wildcard key.
     */
    function _canExecute(address key, bytes32 cidHash, bytes32 pkpId, bool withPkp) private view returns (bool) {
        Role memory role = _roles[key];
        bool wildcard;
        // The owner may invoke actions in every group of its account: it acts as a wildcard key.
        if (role.kind == ROLE_OWNER) wildcard = true;
        else if (_isLiveKey(role)) wildcard = _maskBits(key, role, ScopeMasks.WILDCARD) & ScopeMasks.EXECUTE != 0;
        else return false;
        // PKP indices start at 1, so index 0 stands for "no PKP condition".
        uint256 pkpIndex = 0;
        if (withPkp) {
            PkpRecord storage pkp = _pkps[pkpId];
            if (pkp.accountId != role.accountId) return false;
            pkpIndex = pkp.index;
        }
        return _anyLiveGroupLists(key, role, wildcard, cidHash, pkpIndex);
    }

    /**
     * @dev Scans the account's live groups (at most MAX_GROUPS_PER_ACCOUNT), checking the key's execute mask
     * on each unless `wildcard`, for one listing `cidHash` and, if `pkpIndex` is not 0, that PKP.
     */
    function _anyLiveGroupLists(
        address key,
        Role memory role,
        bool wildcard,
        bytes32 cidHash,
        uint256 pkpIndex
    ) private view returns (bool) {
        uint64 accountId = role.accountId;
        uint64[MAX_GROUPS_PER_ACCOUNT + 1] storage liveIds = _liveGroupIds[accountId];
        uint256 live = liveIds[0];
        for (uint256 i = 1; i <= live; ++i) {
            uint64 groupId = liveIds[i];
            if (!wildcard && _maskBits(key, role, groupId) & ScopeMasks.EXECUTE == 0) continue;
            if (!_actionSets[accountId][groupId].contains(cidHash)) continue;
            if (pkpIndex == 0 || _pkpBits[accountId][groupId].contains(pkpIndex)) return true;
        }
        return false;
    }
}
