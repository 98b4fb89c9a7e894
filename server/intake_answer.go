package server

import "strings"

// intakeAnswer is the 202 body of the intake endpoints (README "Intake").
type intakeAnswer struct {
	Accepted    int `json:"accepted"`
	Duplicates  int `json:"duplicates"`
	Quarantined int `json:"quarantined"`
	Dropped     int `json:"dropped"`
}

// dropReasonsHeader names, on a 202 that dropped events, the gates that
// dropped them, so a forwarder (DLQ replay, webhooks) can say why its event
// was not stored.
const dropReasonsHeader = "Tally-Drop-Reasons"

// dropReasons lists the gates that dropped events of a 202, comma-separated.
func (d *decision) dropReasons() string {
	var reasons []string
	if d.bots > 0 {
		reasons = append(reasons, reasonBot)
	}
	if d.answer.Dropped > d.bots {
		reasons = append(reasons, reasonConsentRequired)
	}
	return strings.Join(reasons, ", ")
}
