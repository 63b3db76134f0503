package retryaws_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/retrykit/retry/retryaws"
)

func TestServiceIDs(t *testing.T) {
	if retryaws.ServiceS3 != s3.ServiceID || retryaws.ServiceDynamoDB != dynamodb.ServiceID {
		t.Fatalf("service IDs %q, %q; the SDK's are %q, %q", retryaws.ServiceS3, retryaws.ServiceDynamoDB, s3.ServiceID, dynamodb.ServiceID)
	}
}

// The guide's table of operation classes (docs/aws.md) says what Safety says: every
// operation it names (wildcards aside) has the class of its row.
func TestREADMEClassTable(t *testing.T) {
	b, err := os.ReadFile("../docs/aws.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "| class | S3 | DynamoDB |")
	if i < 0 {
		t.Fatal("docs/aws.md has no table of operation classes")
	}
	rows := map[string]retryaws.Class{"read-only": retryaws.ReadOnly, "idempotent:": retryaws.Idempotent, "idempotency token": retryaws.Token, "unsafe": retryaws.Unsafe}
	name := regexp.MustCompile("`([A-Z][A-Za-z0-9]+)`")
	checked := 0
	for _, line := range strings.Split(text[i:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		var class retryaws.Class
		found := false
		for prefix, c := range rows {
			if strings.HasPrefix(strings.TrimSpace(cells[1]), prefix) {
				class, found = c, true
			}
		}
		if !found {
			t.Fatalf("row %q: unknown class", cells[1])
		}
		for col, service := range map[int]string{2: retryaws.ServiceS3, 3: retryaws.ServiceDynamoDB} {
			for _, m := range name.FindAllStringSubmatch(cells[col], -1) {
				if got := retryaws.Safety(service, m[1]); got != class {
					t.Errorf("docs/aws.md: %s %s is %v, Safety says %v", service, m[1], class, got)
				}
				checked++
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d operations checked", checked)
	}
}
