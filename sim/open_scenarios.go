package sim

import (
	"fmt"
	"time"

	"github.com/retrykit/retry"
)

// HuangServiceRate is the full service rate of the Huang scenario, in
// requests per second: the one parameter the paper does not give,
// calibrated so that its four published outcomes come out (see the
// package doc, "Calibration").
const HuangServiceRate = 35200

// Bronson returns the toy of Bronson et al., "Metastable Failures in
// Distributed Systems" (HotOS 2021): a database serving 300 requests/s, an
// application sending 280 calls/s (evenly spaced) that resends a request
// once, at once, when it is not answered within 1 s, and a 10 s network
// blip (service rate 0) after 60 s of normal running; 600 s in all.
func Bronson() OpenScenario {
	return OpenScenario{
		Rate:        280,
		ServiceRate: 300,
		Timeout:     time.Second,
		TriggerAt:   60 * time.Second,
		TriggerFor:  10 * time.Second,
		Duration:    600 * time.Second,
		Policy:      retry.Policy{Initial: retry.Immediate, MaxAttempts: 2},
	}
}

// Huang returns the retry reproduction of Huang et al., "Metastable
// Failures in the Wild" (OSDI 2022; repository lexiangh/Metastability,
// Retry_Metastability): a call every 75 µs (about 13,333/s, evenly
// spaced), a 3 s timeout, up to 4 immediate resends, and after 60 s of
// warm-up the server's capacity cut to 20 % for 10 s (the run the paper
// reports stuck); 300 s in all. The depths are the artifact's: the
// primary runs with docker --cpus 2 and the trigger
// (Retry_Metastability/primary/trigger.sh) sets --cpus 0.40, or 0.45 for
// the baseline that recovers, leaving 20 % and 22.5 % of the capacity
// (its README's "-80 % CPU" and "-78 % CPU"). The server's full rate is
// HuangServiceRate. The paper's other outcomes change TriggerCapacity to
// 0.225, TriggerFor to 9 s, or Rate to 10,000/s (a call every 100 µs).
func Huang() OpenScenario {
	return OpenScenario{
		Rate:            1e9 / 75e3,
		ServiceRate:     HuangServiceRate,
		Timeout:         3 * time.Second,
		TriggerAt:       60 * time.Second,
		TriggerFor:      10 * time.Second,
		TriggerCapacity: 0.20,
		Duration:        300 * time.Second,
		Policy:          retry.Policy{Initial: retry.Immediate, MaxAttempts: 5},
	}
}

// OpenScenarioNames lists the names NamedOpenScenario knows.
func OpenScenarioNames() []string { return []string{"bronson", "huang"} }

// NamedOpenScenario returns the scenario called name: "bronson"
// ([Bronson]) or "huang" ([Huang]).
func NamedOpenScenario(name string) (OpenScenario, error) {
	switch name {
	case "bronson":
		return Bronson(), nil
	case "huang":
		return Huang(), nil
	}
	return OpenScenario{}, fmt.Errorf("sim: unknown scenario %q (want bronson or huang)", name)
}
