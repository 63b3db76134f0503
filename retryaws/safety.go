package retryaws

import (
	"context"
	"strings"
	"time"
)

// Class says whether an operation may be sent again after an attempt lost
// its reply (the connection was reset or timed out after the request was
// sent, or the service answered 500, 502 or 504): the service may have
// applied that attempt.
type Class uint8

const (
	// Unsafe: a repeat could apply the operation twice (DynamoDB UpdateItem
	// with an ADD, S3 CreateMultipartUpload). Not repeated after a lost
	// reply: the call ends with an error matching retry.ErrMaybeApplied. It is
	// still retried after failures that show the service did not apply it
	// (throttling, 503, 429, a clock-skew refusal, a connection that was
	// never made). The zero Class, and that of every operation not in the
	// tables.
	Unsafe Class = iota
	// ReadOnly: the operation changes nothing (S3 GET and HEAD, DynamoDB
	// GetItem, Query, Scan, Describe*, List*). Always repeatable.
	ReadOnly
	// Idempotent: a repeat leaves the same state as one call (S3 PUT and
	// DELETE operations, DeleteObjects; DynamoDB PutItem, DeleteItem,
	// BatchWriteItem, TagResource, UntagResource). A repeat may still
	// answer differently: a conditional write whose first attempt was
	// applied fails its condition on the repeat, and a repeated write
	// replaces what another client wrote in between.
	Idempotent
	// Token: the request carries an idempotency token that the SDK fills
	// once per call, before its retry loop, so every attempt sends the same
	// token and the service applies the call at most once (S3 RenameObject;
	// DynamoDB TransactWriteItems, ExecuteTransaction, ImportTable,
	// ExportTableToPointInTime, StartBulkPutItems), as long as it still
	// knows the token: no repeat is sent TokenWindow or later after an
	// attempt that may have been applied (the call ends with
	// retry.ErrMaybeApplied and retry.ReasonTimeBudget instead).
	Token
)

// TokenWindow is how long after an attempt of a Token operation that may
// have been applied (its reply lost) the Retryer still sends a repeat with
// the same token: DynamoDB treats a token as new 10 minutes after the
// first request that used it completed, and this leaves a minute for the
// time between that completion and the client's seeing the failure.
const TokenWindow = 9 * time.Minute

// String returns the class's name in lower case ("read-only").
func (c Class) String() string {
	switch c {
	case ReadOnly:
		return "read-only"
	case Idempotent:
		return "idempotent"
	case Token:
		return "idempotency token"
	}
	return "unsafe"
}

// Service IDs of the clients whose operations Safety knows (the service
// packages' ServiceID constants).
const (
	ServiceS3       = "S3"
	ServiceDynamoDB = "DynamoDB"
)

// Safety returns the class of an operation of a service, by the SDK's
// service ID ("S3", "DynamoDB") and the operation's name ("UpdateItem"),
// as the Retryer applies it when no option or MarkSafe changes it. S3:
// every GET and HEAD operation (and the read-only SelectObjectContent) is
// ReadOnly, every PUT and DELETE operation (and DeleteObjects) Idempotent,
// RenameObject Token, the other POST operations (CreateMultipartUpload,
// CompleteMultipartUpload, RestoreObject, WriteGetObjectResponse, …)
// Unsafe. DynamoDB: see the table in docs/aws.md. Other services and unknown
// operations: Unsafe, except names that start with Get, Head, List or
// Describe, which are ReadOnly.
func Safety(service, operation string) Class {
	if c, ok := tables[service][operation]; ok {
		return c
	}
	for _, p := range [...]string{"Get", "Head", "List", "Describe"} {
		if strings.HasPrefix(operation, p) {
			return ReadOnly
		}
	}
	return Unsafe
}

// MarkSafe returns a context that makes a call safe to repeat after a lost
// reply whatever its operation's class: use it for a call that the
// application knows is idempotent, such as an UpdateItem that only SETs
// fixed values (if such a call still fails after a lost reply, its error
// matches retry.ErrMaybeApplied, as for any write):
//
//	out, err := db.UpdateItem(retryaws.MarkSafe(ctx), in)
func MarkSafe(ctx context.Context) context.Context {
	return context.WithValue(ctx, safeKey{}, true)
}

type safeKey struct{}

func markedSafe(ctx context.Context) bool {
	v, _ := ctx.Value(safeKey{}).(bool)
	return v
}

// tables holds the classes of the S3 and DynamoDB operations of the
// service modules this module is built with (s3 v1.115.0: the HTTP method
// of each operation's serializer; dynamodb v1.74.1: what each operation
// does).
var tables = map[string]map[string]Class{
	ServiceS3:       s3Table,
	ServiceDynamoDB: dynamoTable,
}

var s3Table = classes(map[Class]string{
	ReadOnly: `CreateSession GetBucketAbac GetBucketAccelerateConfiguration GetBucketAcl
		GetBucketAnalyticsConfiguration GetBucketCors GetBucketEncryption
		GetBucketIntelligentTieringConfiguration GetBucketInventoryConfiguration
		GetBucketLifecycleConfiguration GetBucketLocation GetBucketLogging
		GetBucketMetadataConfiguration GetBucketMetadataTableConfiguration
		GetBucketMetricsConfiguration GetBucketNotificationConfiguration
		GetBucketOwnershipControls GetBucketPolicy GetBucketPolicyStatus GetBucketReplication
		GetBucketRequestPayment GetBucketTagging GetBucketVersioning GetBucketWebsite GetObject
		GetObjectAcl GetObjectAnnotation GetObjectAttributes GetObjectLegalHold
		GetObjectLockConfiguration GetObjectRetention GetObjectTagging GetObjectTorrent
		GetPublicAccessBlock ListBucketAnalyticsConfigurations
		ListBucketIntelligentTieringConfigurations ListBucketInventoryConfigurations
		ListBucketMetricsConfigurations ListBuckets ListDirectoryBuckets ListMultipartUploads
		ListObjectAnnotations ListObjectVersions ListObjects ListObjectsV2 ListParts
		HeadBucket HeadObject SelectObjectContent`,
	Idempotent: `AbortMultipartUpload DeleteBucket DeleteBucketAnalyticsConfiguration DeleteBucketCors
		DeleteBucketEncryption DeleteBucketIntelligentTieringConfiguration
		DeleteBucketInventoryConfiguration DeleteBucketLifecycle DeleteBucketMetadataConfiguration
		DeleteBucketMetadataTableConfiguration DeleteBucketMetricsConfiguration
		DeleteBucketOwnershipControls DeleteBucketPolicy DeleteBucketReplication
		DeleteBucketTagging DeleteBucketWebsite DeleteObject DeleteObjectAnnotation
		DeleteObjectTagging DeletePublicAccessBlock DeleteObjects
		CopyObject CreateBucket PutBucketAbac PutBucketAccelerateConfiguration PutBucketAcl
		PutBucketAnalyticsConfiguration PutBucketCors PutBucketEncryption
		PutBucketIntelligentTieringConfiguration PutBucketInventoryConfiguration
		PutBucketLifecycleConfiguration PutBucketLogging PutBucketMetricsConfiguration
		PutBucketNotificationConfiguration PutBucketOwnershipControls PutBucketPolicy
		PutBucketReplication PutBucketRequestPayment PutBucketTagging PutBucketVersioning
		PutBucketWebsite PutObject PutObjectAcl PutObjectAnnotation PutObjectLegalHold
		PutObjectLockConfiguration PutObjectRetention PutObjectTagging PutPublicAccessBlock
		UpdateBucketMetadataAnnotationTableConfiguration
		UpdateBucketMetadataInventoryTableConfiguration
		UpdateBucketMetadataJournalTableConfiguration UpdateObjectEncryption UploadPart
		UploadPartCopy`,
	Token: `RenameObject`,
	Unsafe: `CompleteMultipartUpload CreateBucketMetadataConfiguration
		CreateBucketMetadataTableConfiguration CreateMultipartUpload RestoreObject
		WriteGetObjectResponse`,
})

var dynamoTable = classes(map[Class]string{
	ReadOnly: `BatchGetItem DescribeBackup DescribeBulkOperation DescribeContinuousBackups
		DescribeContributorInsights DescribeEndpoints DescribeExport DescribeGlobalTable
		DescribeGlobalTableSettings DescribeImport DescribeKinesisStreamingDestination
		DescribeLimits DescribeTable DescribeTableReplicaAutoScaling DescribeTimeToLive
		GetItem GetResourcePolicy ListBackups ListBulkOperations ListContributorInsights
		ListExports ListGlobalTables ListImports ListTables ListTagsOfResource Query Scan
		SearchVectors TransactGetItems`,
	Idempotent: `PutItem DeleteItem BatchWriteItem TagResource UntagResource`,
	Token:      `TransactWriteItems ExecuteTransaction ImportTable ExportTableToPointInTime StartBulkPutItems`,
	Unsafe: `UpdateItem BatchExecuteStatement ExecuteStatement CreateTable DeleteTable UpdateTable
		CreateBackup DeleteBackup CreateGlobalTable UpdateGlobalTable UpdateGlobalTableSettings
		RestoreTableFromBackup RestoreTableToPointInTime UpdateContinuousBackups
		UpdateContributorInsights UpdateKinesisStreamingDestination
		EnableKinesisStreamingDestination DisableKinesisStreamingDestination
		UpdateTableReplicaAutoScaling UpdateTimeToLive PutResourcePolicy DeleteResourcePolicy
		CancelBulkOperation`,
})

func classes(m map[Class]string) map[string]Class {
	t := make(map[string]Class)
	for c, names := range m {
		for _, n := range strings.Fields(names) {
			t[n] = c
		}
	}
	return t
}
