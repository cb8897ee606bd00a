package authz

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/wire"
)

// handler checks one API key's requests.
type handler struct {
	// maxVersion is the newest version the check was written for: a
	// newer one may name resources in fields it does not read, and is
	// refused with UNSUPPORTED_VERSION.
	maxVersion int16
	// check decides the request: it lets it through, takes the refused
	// resources out of it (and keeps fixups for the answer), or answers
	// it. An error ends the connection.
	check func(a *call) error
	// refuse is the API's answer to the whole request with code for
	// every resource it names.
	refuse func(req kmsg.Request, code int16) (kmsg.Response, error)
}

// handlers are the API keys the filter checks.
var handlers = map[int16]handler{
	wire.KeyProduce: {13, checkProduce, refuseProduce},
	wire.KeyFetch:   {18, checkFetch, refuseFetch},

	wire.KeyMetadata:           {13, checkMetadata, refuseMetadata},
	keyDescribeTopicPartitions: {0, checkDescribeTopicPartitions, refuseDescribeTopicPartitions},
	wire.KeyDescribeCluster:    {2, checkDescribeCluster, refuseDescribeCluster},

	keyJoinGroup:              {9, checkJoinGroup, refuseJoinGroup},
	keySyncGroup:              {5, checkSyncGroup, refuseSyncGroup},
	keyHeartbeat:              {4, checkHeartbeat, refuseHeartbeat},
	keyLeaveGroup:             {5, checkLeaveGroup, refuseLeaveGroup},
	keyConsumerGroupHeartbeat: {1, checkConsumerGroupHeartbeat, refuseConsumerGroupHeartbeat},
	keyDescribeGroups:         {6, checkDescribeGroups, refuseDescribeGroups},
	keyListGroups:             {5, checkListGroups, refuseListGroups},
	keyDeleteGroups:           {3, checkDeleteGroups, refuseDeleteGroups},
	wire.KeyFindCoordinator:   {6, checkFindCoordinator, refuseFindCoordinator},
	keyOffsetCommit:           {10, checkOffsetCommit, refuseOffsetCommit},
	keyOffsetFetch:            {10, checkOffsetFetch, refuseOffsetFetch},
	keyOffsetDelete:           {0, checkOffsetDelete, refuseOffsetDelete},

	keyListOffsets:          {11, checkListOffsets, refuseListOffsets},
	keyOffsetForLeaderEpoch: {4, checkOffsetForLeaderEpoch, refuseOffsetForLeaderEpoch},
	keyDeleteRecords:        {2, checkDeleteRecords, refuseDeleteRecords},
	keyDescribeProducers:    {0, checkDescribeProducers, refuseDescribeProducers},

	keyInitProducerID:       {5, checkInitProducerID, refuseInitProducerID},
	keyAddPartitionsToTxn:   {5, checkAddPartitionsToTxn, refuseAddPartitionsToTxn},
	keyAddOffsetsToTxn:      {4, checkAddOffsetsToTxn, refuseAddOffsetsToTxn},
	keyEndTxn:               {5, checkEndTxn, refuseEndTxn},
	keyTxnOffsetCommit:      {6, checkTxnOffsetCommit, refuseTxnOffsetCommit},
	keyDescribeTransactions: {0, checkDescribeTransactions, refuseDescribeTransactions},
	keyListTransactions:     {2, checkListTransactions, refuseListTransactions},

	keyCreateTopics:            {7, checkCreateTopics, refuseCreateTopics},
	keyDeleteTopics:            {6, checkDeleteTopics, refuseDeleteTopics},
	keyCreatePartitions:        {3, checkCreatePartitions, refuseCreatePartitions},
	keyDescribeConfigs:         {4, checkDescribeConfigs, refuseDescribeConfigs},
	keyAlterConfigs:            {2, checkAlterConfigs, refuseAlterConfigs},
	keyIncrementalAlterConfigs: {1, checkIncrementalAlterConfigs, refuseIncrementalAlterConfigs},
}

// alwaysAllowed are the keys that name no resource: the version handshake
// and authentication itself, which the authentication stage handles
// before any filter.
func alwaysAllowed(key int16) bool {
	switch key {
	case wire.KeyApiVersions, wire.KeySASLHandshake, keySASLAuthenticate:
		return true
	case keyGetTelemetrySubscriptions, keyPushTelemetry:
		// A client's own metrics (KIP-714): Kafka authorizes no
		// resource for them, and clients ask on every connection, so
		// refusing them would only fill logs.
		return true
	}
	return false
}

// API keys wire does not name.
const (
	keySASLAuthenticate        int16 = 36
	keyDescribeTopicPartitions int16 = 75

	keyGetTelemetrySubscriptions int16 = 71
	keyPushTelemetry             int16 = 72
)
