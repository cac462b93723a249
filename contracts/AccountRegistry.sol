// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC2771Context} from "@openzeppelin/contracts/metatx/ERC2771Context.sol";
import {EnumerableSet} from "@openzeppelin/contracts/utils/structs/EnumerableSet.sol";
import {IAccountRegistry} from "./interfaces/IAccountRegistry.sol";
import {ScopeMasks} from "./libraries/ScopeMasks.sol";

/**
 * @title AccountRegistry
 * @notice The Sigil permission registry (SPEC sections 2 and 5.4, DESIGN.md section 3). Non-upgradeable and
 * without an admin: nobody but an account's owner can change what that account's keys may do.
 * @dev Every write resolves the account from `_msgSender()`: the owner of an account, or a live usage key of it.
 * Path A reaches the same functions through the one trusted ERC-2771 forwarder, so `_msgSender()` is the
 * signer of the forwarded request and the scopes are enforced here, not in the relayer.
 */
contract AccountRegistry is IAccountRegistry, ERC2771Context {
    using EnumerableSet for EnumerableSet.AddressSet;
    using EnumerableSet for EnumerableSet.Bytes32Set;
    using EnumerableSet for EnumerableSet.UintSet;
    using ScopeMasks for ScopeMasks.Masks;

    // ------------------------------------------------------------------------------------------------
    // Bounds: every write touches a bounded number of slots, every view a bounded number of items.
    // ------------------------------------------------------------------------------------------------

    /// @notice Maximum number of ids in one `KeyScopes` array.
    uint256 public constant MAX_SCOPE_ENTRIES = 64;
    /// @notice Maximum number of ids in the four `KeyScopes` arrays together. Four full arrays of distinct ids
    /// would need about 18M gas to write, more than any transaction may use (EIP-7825: 2^24); 128 need about 9M.
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

    struct AccountRecord {
        address owner;
        uint64 groupCount;
        address pendingOwner;
        address masterKey;
        string name;
    }

    struct KeyRecord {
        uint64 accountId;
        uint64 expiration;
        uint64 createdAt;
        bool canCreateGroups;
        bool canDeleteGroups;
        bool canCreatePkps;
        bytes32 keyHash;
        string name;
        string description;
    }

    struct PkpRecord {
        uint64 accountId;
        string name;
        string description;
    }

    struct GroupRecord {
        bool live;
        string name;
        string description;
        EnumerableSet.Bytes32Set pkps;
        EnumerableSet.Bytes32Set actions;
    }

    uint64 private _accountCount;
    mapping(uint64 accountId => AccountRecord) private _accounts;
    mapping(address owner => uint64 accountId) private _accountOfOwner;
    mapping(address masterKey => uint64 accountId) private _accountOfMasterKey;

    mapping(address key => KeyRecord) private _keys;
    mapping(address key => ScopeMasks.Masks) private _masks;
    mapping(uint64 accountId => EnumerableSet.AddressSet) private _accountKeys;

    mapping(bytes32 pkpId => PkpRecord) private _pkps;
    mapping(uint64 accountId => bytes32[]) private _accountPkps;

    mapping(uint64 accountId => mapping(uint64 groupId => GroupRecord)) private _groups;
    mapping(uint64 accountId => EnumerableSet.UintSet) private _liveGroups;

    mapping(bytes32 cidHash => string cid) private _cids;

    /// @param trustedForwarder_ The only ERC-2771 forwarder whose appended sender is believed (path A).
    constructor(address trustedForwarder_) ERC2771Context(trustedForwarder_) {
        if (trustedForwarder_ == address(0)) revert ZeroAddress();
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
        account.masterKey = masterKey;
        account.name = name;
        _accountOfOwner[sender] = accountId;
        if (masterKey != address(0)) _accountOfMasterKey[masterKey] = accountId;
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
        delete _accountOfOwner[previousOwner];
        _accountOfOwner[sender] = accountId;
        account.owner = sender;
        account.pendingOwner = address(0);
        emit OwnershipTransferred(accountId, previousOwner, sender);
    }

    // ------------------------------------------------------------------------------------------------
    // Usage keys (owner only)
    // ------------------------------------------------------------------------------------------------

    /// @inheritdoc IAccountRegistry
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

        KeyRecord storage record = _keys[key];
        record.accountId = accountId;
        record.keyHash = keyHash;
        record.createdAt = uint64(block.timestamp);
        _writeKey(record, key, name, description, expiration, scopes);
        _accountKeys[accountId].add(key);
        emit KeyAdded(accountId, key, keyHash, name, description, expiration, scopes);
    }

    /// @inheritdoc IAccountRegistry
    function updateKey(
        address key,
        string calldata name,
        string calldata description,
        uint64 expiration,
        KeyScopes calldata scopes
    ) external {
        (, uint64 accountId) = _requireOwner();
        KeyRecord storage record = _requireLiveKeyOf(accountId, key);
        _checkKeyFields(accountId, name, description, expiration, scopes);

        _masks[key].clear();
        _writeKey(record, key, name, description, expiration, scopes);
        emit KeyUpdated(accountId, key, name, description, expiration, scopes);
    }

    /// @inheritdoc IAccountRegistry
    function updateKeyMetadata(address key, string calldata name, string calldata description) external {
        (, uint64 accountId) = _requireOwner();
        KeyRecord storage record = _requireLiveKeyOf(accountId, key);
        _checkString(name);
        _checkString(description);

        record.name = name;
        record.description = description;
        emit KeyMetadataUpdated(accountId, key, name, description);
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev Also accepts an expired key, so the owner can free its address.
     */
    function removeKey(address key) external {
        (, uint64 accountId) = _requireOwner();
        if (_keys[key].accountId != accountId) revert UnknownKey(key);

        _masks[key].clear();
        delete _keys[key];
        _accountKeys[accountId].remove(key);
        emit KeyRemoved(accountId, key);
    }

    // ------------------------------------------------------------------------------------------------
    // PKPs and groups
    // ------------------------------------------------------------------------------------------------

    /**
     * @inheritdoc IAccountRegistry
     * @dev pkpId = keccak256(abi.encode(chainid, this, accountId, counter)) with a per-account counter from 1:
     * unique across accounts, registries and chains, and never zero (a zero hash is computationally infeasible).
     */
    function createPkp(string calldata name, string calldata description) external returns (bytes32 pkpId) {
        uint64 accountId = _authorize(Scope.CreatePkp, 0);
        _checkString(name);
        _checkString(description);

        bytes32[] storage pkps = _accountPkps[accountId];
        pkpId = keccak256(abi.encode(block.chainid, address(this), accountId, pkps.length + 1));
        PkpRecord storage record = _pkps[pkpId];
        record.accountId = accountId;
        record.name = name;
        record.description = description;
        pkps.push(pkpId);
        emit PkpCreated(accountId, pkpId, name, description);
    }

    /// @inheritdoc IAccountRegistry
    function createGroup(
        string calldata name,
        string calldata description,
        bytes32[] calldata pkpIds,
        string[] calldata cids
    ) external returns (uint64 groupId) {
        (address caller, uint64 accountId, bool isOwner) = _caller();
        _requireScope(caller, accountId, isOwner, Scope.CreateGroup, 0);
        _checkBatch(pkpIds.length);
        _checkBatch(cids.length);
        groupId = _newGroup(accountId, name, description);
        // Initial members only where the caller could add them afterwards: for a key, that is the wildcard,
        // since a scope array can only name groups that already existed.
        if (pkpIds.length != 0) _requireScope(caller, accountId, isOwner, Scope.AddPkp, groupId);
        if (cids.length != 0) _requireScope(caller, accountId, isOwner, Scope.ManageActions, groupId);

        GroupRecord storage group = _groups[accountId][groupId];
        for (uint256 i = 0; i < pkpIds.length; ++i) {
            _addPkp(accountId, groupId, group, pkpIds[i]);
        }
        for (uint256 i = 0; i < cids.length; ++i) {
            _addAction(accountId, groupId, group, cids[i]);
        }
    }

    /// @inheritdoc IAccountRegistry
    function deleteGroup(uint64 groupId) external {
        uint64 accountId = _authorize(Scope.DeleteGroup, 0);
        GroupRecord storage group = _requireGroup(accountId, groupId);

        // Members are bounded (MAX_PKPS_PER_GROUP + MAX_ACTIONS_PER_GROUP), so wiping them is bounded too.
        group.pkps.clear();
        group.actions.clear();
        delete _groups[accountId][groupId];
        _liveGroups[accountId].remove(groupId);
        emit GroupDeleted(accountId, groupId);
    }

    /// @inheritdoc IAccountRegistry
    function addAction(uint64 groupId, string calldata cid) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        _addAction(accountId, groupId, _requireGroup(accountId, groupId), cid);
    }

    /// @inheritdoc IAccountRegistry
    function removeAction(uint64 groupId, string calldata cid) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        _removeAction(accountId, groupId, _requireGroup(accountId, groupId), cid);
    }

    /// @inheritdoc IAccountRegistry
    function addActions(uint64 groupId, string[] calldata cids) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        GroupRecord storage group = _requireGroup(accountId, groupId);
        _checkBatch(cids.length);
        for (uint256 i = 0; i < cids.length; ++i) {
            _addAction(accountId, groupId, group, cids[i]);
        }
    }

    /// @inheritdoc IAccountRegistry
    function removeActions(uint64 groupId, string[] calldata cids) external {
        uint64 accountId = _authorize(Scope.ManageActions, groupId);
        GroupRecord storage group = _requireGroup(accountId, groupId);
        _checkBatch(cids.length);
        for (uint256 i = 0; i < cids.length; ++i) {
            _removeAction(accountId, groupId, group, cids[i]);
        }
    }

    /// @inheritdoc IAccountRegistry
    function addPkp(uint64 groupId, bytes32 pkpId) external {
        uint64 accountId = _authorize(Scope.AddPkp, groupId);
        _addPkp(accountId, groupId, _requireGroup(accountId, groupId), pkpId);
    }

    /// @inheritdoc IAccountRegistry
    function removePkp(uint64 groupId, bytes32 pkpId) external {
        uint64 accountId = _authorize(Scope.RemovePkp, groupId);
        _removePkp(accountId, groupId, _requireGroup(accountId, groupId), pkpId);
    }

    /// @inheritdoc IAccountRegistry
    function addPkps(uint64 groupId, bytes32[] calldata pkpIds) external {
        uint64 accountId = _authorize(Scope.AddPkp, groupId);
        GroupRecord storage group = _requireGroup(accountId, groupId);
        _checkBatch(pkpIds.length);
        for (uint256 i = 0; i < pkpIds.length; ++i) {
            _addPkp(accountId, groupId, group, pkpIds[i]);
        }
    }

    /// @inheritdoc IAccountRegistry
    function removePkps(uint64 groupId, bytes32[] calldata pkpIds) external {
        uint64 accountId = _authorize(Scope.RemovePkp, groupId);
        GroupRecord storage group = _requireGroup(accountId, groupId);
        _checkBatch(pkpIds.length);
        for (uint256 i = 0; i < pkpIds.length; ++i) {
            _removePkp(accountId, groupId, group, pkpIds[i]);
        }
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
                pkpCount: uint64(_accountPkps[accountId].length),
                keyCount: uint64(_accountKeys[accountId].length())
            });
    }

    /// @inheritdoc IAccountRegistry
    function accountOfOwner(address owner) external view returns (uint64) {
        return _accountOfOwner[owner];
    }

    /// @inheritdoc IAccountRegistry
    function accountOfMasterKey(address masterKey) external view returns (uint64) {
        return _accountOfMasterKey[masterKey];
    }

    /// @inheritdoc IAccountRegistry
    function accountOfKey(address key) external view returns (uint64) {
        KeyRecord storage record = _keys[key];
        return _isLive(record) ? record.accountId : 0;
    }

    /// @inheritdoc IAccountRegistry
    function getKey(address key) external view returns (KeyInfo memory) {
        if (!_isLive(_keys[key])) revert UnknownKey(key);
        return _keyInfo(key);
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev The page is taken over every registered key (`total`), then expired keys are left out, so a page
     * may hold fewer than `limit` items. Keys are in registration order, except that removing a key moves the
     * last one into its place.
     */
    function listKeys(
        uint64 accountId,
        uint256 offset,
        uint256 limit
    ) external view returns (KeyInfo[] memory items, uint256 total) {
        EnumerableSet.AddressSet storage keys = _accountKeys[accountId];
        total = keys.length();
        (uint256 start, uint256 end) = _page(total, offset, limit);
        KeyInfo[] memory buffer = new KeyInfo[](end - start);
        uint256 count = 0;
        for (uint256 i = start; i < end; ++i) {
            address key = keys.at(i);
            if (_isLive(_keys[key])) {
                buffer[count] = _keyInfo(key);
                ++count;
            }
        }
        items = new KeyInfo[](count);
        for (uint256 i = 0; i < count; ++i) {
            items[i] = buffer[i];
        }
    }

    /// @inheritdoc IAccountRegistry
    function hasScope(address key, Scope scope, uint64 groupId) external view returns (bool) {
        KeyRecord storage record = _keys[key];
        return _isLive(record) && _holdsScope(key, record, scope, groupId);
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
        bytes32[] storage pkps = _accountPkps[accountId];
        total = pkps.length;
        (uint256 start, uint256 end) = _page(total, offset, limit);
        items = new PkpInfo[](end - start);
        for (uint256 i = start; i < end; ++i) {
            PkpRecord storage record = _pkps[pkps[i]];
            items[i - start] = PkpInfo({
                id: pkps[i],
                accountId: accountId,
                name: record.name,
                description: record.description
            });
        }
    }

    /// @inheritdoc IAccountRegistry
    function getGroup(uint64 accountId, uint64 groupId) external view returns (GroupInfo memory) {
        return _groupInfo(accountId, groupId, _requireGroup(accountId, groupId));
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
        EnumerableSet.UintSet storage live = _liveGroups[accountId];
        total = live.length();
        (uint256 start, uint256 end) = _page(total, offset, limit);
        items = new GroupInfo[](end - start);
        for (uint256 i = start; i < end; ++i) {
            uint64 groupId = uint64(live.at(i));
            items[i - start] = _groupInfo(accountId, groupId, _groups[accountId][groupId]);
        }
    }

    /// @inheritdoc IAccountRegistry
    function groupPkps(
        uint64 accountId,
        uint64 groupId,
        uint256 offset,
        uint256 limit
    ) external view returns (bytes32[] memory items, uint256 total) {
        EnumerableSet.Bytes32Set storage pkps = _requireGroup(accountId, groupId).pkps;
        total = pkps.length();
        (uint256 start, uint256 end) = _page(total, offset, limit);
        items = pkps.values(start, end);
    }

    /// @inheritdoc IAccountRegistry
    function groupActions(
        uint64 accountId,
        uint64 groupId,
        uint256 offset,
        uint256 limit
    ) external view returns (string[] memory items, uint256 total) {
        EnumerableSet.Bytes32Set storage actions = _requireGroup(accountId, groupId).actions;
        total = actions.length();
        (uint256 start, uint256 end) = _page(total, offset, limit);
        items = new string[](end - start);
        for (uint256 i = start; i < end; ++i) {
            items[i - start] = _cids[actions.at(i)];
        }
    }

    /// @inheritdoc IAccountRegistry
    function cidOf(bytes32 cidHash) external view returns (string memory) {
        return _cids[cidHash];
    }

    /**
     * @inheritdoc IAccountRegistry
     * @dev The owner of an account is also answered: it may execute in every group of its account (SPEC 5.4).
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
    function forwarder() external view returns (address) {
        return trustedForwarder();
    }

    // ------------------------------------------------------------------------------------------------
    // Authorization
    // ------------------------------------------------------------------------------------------------

    /// @dev The caller, its account, and whether it is that account's owner. Reverts for anyone else.
    function _caller() private view returns (address caller, uint64 accountId, bool isOwner) {
        caller = _msgSender();
        accountId = _accountOfOwner[caller];
        if (accountId != 0) return (caller, accountId, true);
        KeyRecord storage record = _keys[caller];
        accountId = record.accountId;
        if (accountId == 0) revert NoAccount(caller);
        if (_isExpired(record)) revert KeyExpired(caller, record.expiration);
    }

    /// @dev Owner-only operations: every key is refused, whatever it holds.
    function _requireOwner() private view returns (address caller, uint64 accountId) {
        bool isOwner;
        (caller, accountId, isOwner) = _caller();
        if (!isOwner) revert NotOwner(caller, accountId);
    }

    /// @dev The caller's account, if the caller is its owner or a live key holding `scope` on `groupId`.
    function _authorize(Scope scope, uint64 groupId) private view returns (uint64 accountId) {
        address caller;
        bool isOwner;
        (caller, accountId, isOwner) = _caller();
        _requireScope(caller, accountId, isOwner, scope, groupId);
    }

    function _requireScope(address caller, uint64 accountId, bool isOwner, Scope scope, uint64 groupId) private view {
        if (isOwner || _holdsScope(caller, _keys[caller], scope, groupId)) return;
        revert MissingScope(caller, accountId, scope, groupId);
    }

    /**
     * @dev The one scope rule, for `hasScope` and for writes alike: account-wide scopes come from the key's
     * flags; a per-group scope on group 0 asks for the wildcard; on any other id it counts only while that id
     * is a live group of the key's account (a deleted group's masks stay behind, but grant nothing).
     */
    function _holdsScope(
        address key,
        KeyRecord storage record,
        Scope scope,
        uint64 groupId
    ) private view returns (bool) {
        if (scope == Scope.CreatePkp) return record.canCreatePkps;
        if (scope == Scope.CreateGroup) return record.canCreateGroups;
        if (scope == Scope.DeleteGroup) return record.canDeleteGroups;
        uint8 bit = ScopeMasks.bitOf(scope);
        if (groupId == ScopeMasks.WILDCARD) return _masks[key].isWildcard(bit);
        return _groups[record.accountId][groupId].live && _masks[key].allows(bit, groupId);
    }

    function _isExpired(KeyRecord storage record) private view returns (bool) {
        return record.expiration != 0 && block.timestamp >= record.expiration;
    }

    function _isLive(KeyRecord storage record) private view returns (bool) {
        return record.accountId != 0 && !_isExpired(record);
    }

    /// @dev An address is at most one of: an owner, a master key, a usage key (expired or not).
    function _requireUnused(address addr) private view {
        if (_accountOfOwner[addr] != 0 || _accountOfMasterKey[addr] != 0 || _keys[addr].accountId != 0) {
            revert AddressInUse(addr);
        }
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
    function _requireLiveKeyOf(uint64 accountId, address key) private view returns (KeyRecord storage record) {
        record = _keys[key];
        if (record.accountId != accountId) revert UnknownKey(key);
        if (_isExpired(record)) revert KeyExpired(key, record.expiration);
    }

    // ------------------------------------------------------------------------------------------------
    // Writes
    // ------------------------------------------------------------------------------------------------

    function _writeKey(
        KeyRecord storage record,
        address key,
        string calldata name,
        string calldata description,
        uint64 expiration,
        KeyScopes calldata scopes
    ) private {
        record.name = name;
        record.description = description;
        record.expiration = expiration;
        record.canCreateGroups = scopes.canCreateGroups;
        record.canDeleteGroups = scopes.canDeleteGroups;
        record.canCreatePkps = scopes.canCreatePkps;
        _masks[key].grant(scopes);
    }

    function _newGroup(
        uint64 accountId,
        string calldata name,
        string calldata description
    ) private returns (uint64 groupId) {
        _checkString(name);
        _checkString(description);
        EnumerableSet.UintSet storage live = _liveGroups[accountId];
        if (live.length() >= MAX_GROUPS_PER_ACCOUNT) revert TooManyGroups(accountId, MAX_GROUPS_PER_ACCOUNT);
        groupId = ++_accounts[accountId].groupCount;
        GroupRecord storage group = _groups[accountId][groupId];
        group.live = true;
        group.name = name;
        group.description = description;
        live.add(groupId);
        emit GroupCreated(accountId, groupId, name, description);
    }

    function _addAction(uint64 accountId, uint64 groupId, GroupRecord storage group, string calldata cid) private {
        uint256 length = bytes(cid).length;
        if (length == 0) revert EmptyCid();
        if (length > MAX_CID_BYTES) revert CidTooLong(length, MAX_CID_BYTES);
        if (group.actions.length() >= MAX_ACTIONS_PER_GROUP) revert TooManyMembers(groupId, MAX_ACTIONS_PER_GROUP);
        bytes32 cidHash = keccak256(bytes(cid));
        if (!group.actions.add(cidHash)) revert ActionAlreadyInGroup(groupId, cid);
        if (bytes(_cids[cidHash]).length == 0) _cids[cidHash] = cid;
        emit ActionAdded(accountId, groupId, cidHash, cid);
    }

    function _removeAction(uint64 accountId, uint64 groupId, GroupRecord storage group, string calldata cid) private {
        bytes32 cidHash = keccak256(bytes(cid));
        if (!group.actions.remove(cidHash)) revert ActionNotInGroup(groupId, cid);
        emit ActionRemoved(accountId, groupId, cidHash);
    }

    function _addPkp(uint64 accountId, uint64 groupId, GroupRecord storage group, bytes32 pkpId) private {
        if (_pkps[pkpId].accountId != accountId) revert PkpNotInAccount(pkpId, accountId);
        if (group.pkps.length() >= MAX_PKPS_PER_GROUP) revert TooManyMembers(groupId, MAX_PKPS_PER_GROUP);
        if (!group.pkps.add(pkpId)) revert PkpAlreadyInGroup(groupId, pkpId);
        emit PkpAdded(accountId, groupId, pkpId);
    }

    function _removePkp(uint64 accountId, uint64 groupId, GroupRecord storage group, bytes32 pkpId) private {
        if (!group.pkps.remove(pkpId)) revert PkpNotInGroup(groupId, pkpId);
        emit PkpRemoved(accountId, groupId, pkpId);
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
        for (uint256 i = 0; i < groupIds.length; ++i) {
            uint64 groupId = groupIds[i];
            if (groupId != ScopeMasks.WILDCARD && !_groups[accountId][groupId].live) {
                revert UnknownGroup(accountId, groupId);
            }
        }
    }

    // ------------------------------------------------------------------------------------------------
    // View helpers
    // ------------------------------------------------------------------------------------------------

    /// @dev Bounds of a page: [start, end) clipped to `total`.
    function _page(uint256 total, uint256 offset, uint256 limit) private pure returns (uint256 start, uint256 end) {
        if (limit > MAX_PAGE_SIZE) revert PageTooLarge(limit, MAX_PAGE_SIZE);
        start = offset < total ? offset : total;
        end = total - start < limit ? total : start + limit;
    }

    function _keyInfo(address key) private view returns (KeyInfo memory) {
        KeyRecord storage record = _keys[key];
        ScopeMasks.Masks storage masks = _masks[key];
        return
            KeyInfo({
                key: key,
                accountId: record.accountId,
                keyHash: record.keyHash,
                name: record.name,
                description: record.description,
                expiration: record.expiration,
                createdAt: record.createdAt,
                scopes: KeyScopes({
                    canCreateGroups: record.canCreateGroups,
                    canDeleteGroups: record.canDeleteGroups,
                    canCreatePkps: record.canCreatePkps,
                    manageIpfsIdsInGroups: masks.groupsWith(ScopeMasks.MANAGE_ACTIONS),
                    addPkpToGroups: masks.groupsWith(ScopeMasks.ADD_PKP),
                    removePkpFromGroups: masks.groupsWith(ScopeMasks.REMOVE_PKP),
                    executeInGroups: masks.groupsWith(ScopeMasks.EXECUTE)
                })
            });
    }

    function _groupInfo(
        uint64 accountId,
        uint64 groupId,
        GroupRecord storage group
    ) private view returns (GroupInfo memory) {
        return
            GroupInfo({
                id: groupId,
                accountId: accountId,
                name: group.name,
                description: group.description,
                pkpCount: group.pkps.length(),
                actionCount: group.actions.length()
            });
    }

    /**
     * @dev Whether some live group of the key's account, on which the key holds execute, lists `cidHash` (and
     * `pkpId` when `withPkp`). An account's owner counts as a wildcard key. A wildcard key scans the account's live groups (at most MAX_GROUPS_PER_ACCOUNT);
     * any other key scans only the ids it is scoped on (at most MAX_SCOPE_ENTRIES_PER_KEY).
     */
    function _canExecute(address key, bytes32 cidHash, bytes32 pkpId, bool withPkp) private view returns (bool) {
        // The owner may invoke actions in every group of its account (SPEC 5.4): it acts as a wildcard key.
        uint64 accountId = _accountOfOwner[key];
        bool wildcard = accountId != 0;
        if (!wildcard) {
            KeyRecord storage record = _keys[key];
            if (!_isLive(record)) return false;
            accountId = record.accountId;
            wildcard = _masks[key].isWildcard(ScopeMasks.EXECUTE);
        }
        if (withPkp && _pkps[pkpId].accountId != accountId) return false;
        mapping(uint64 => GroupRecord) storage groups = _groups[accountId];
        if (wildcard) {
            EnumerableSet.UintSet storage live = _liveGroups[accountId];
            uint256 count = live.length();
            for (uint256 i = 0; i < count; ++i) {
                if (_lists(groups[uint64(live.at(i))], cidHash, pkpId, withPkp)) return true;
            }
            return false;
        }
        ScopeMasks.Masks storage masks = _masks[key];
        uint256 scoped = masks.length();
        for (uint256 i = 0; i < scoped; ++i) {
            (uint64 groupId, uint8 bits) = masks.at(i);
            if (bits & ScopeMasks.EXECUTE == 0) continue;
            GroupRecord storage group = groups[groupId];
            if (group.live && _lists(group, cidHash, pkpId, withPkp)) return true;
        }
        return false;
    }

    function _lists(
        GroupRecord storage group,
        bytes32 cidHash,
        bytes32 pkpId,
        bool withPkp
    ) private view returns (bool) {
        return group.actions.contains(cidHash) && (!withPkp || group.pkps.contains(pkpId));
    }
}
