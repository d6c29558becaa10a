package gate

import (
	"github.com/readstate/receipts/pkg/gate/channelcalls"
	"github.com/readstate/receipts/pkg/gate/seam"
)

// The gate's configuration is the seam's: every handler reads it there.
type (
	Config         = seam.Config
	ReadByConfig   = seam.ReadByConfig
	CoalesceConfig = seam.CoalesceConfig
	RestoreConfig  = seam.RestoreConfig
	Producer       = seam.Producer
)

// The defaults and bounds other packages size themselves by.
const (
	MaxBatchItemsDefault     = seam.MaxBatchItemsDefault
	MaxRecordBytes           = seam.MaxRecordBytes
	MetricsSubsystem         = seam.MetricsSubsystem
	RedisTimeoutDefault      = seam.RedisTimeoutDefault
	MaxReadChannelsDefault   = seam.MaxReadChannelsDefault
	MaxUnreadChannelsDefault = seam.MaxUnreadChannelsDefault
	MaxMentions              = seam.MaxMentions
	MaxNotices               = channelcalls.MaxNotices
)
