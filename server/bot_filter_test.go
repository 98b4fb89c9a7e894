package server

import (
	"testing"

	"github.com/tally-analytics/tally/privacy"
)

const headlessUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36"

// A test run's headless browser looks like a bot: with BOT_FILTER=off
// (dev mode's default) its events are stored and the feed marks them; with
// it on they are dropped, as in production.
func TestBotFilterSetting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		setting                 string
		wantAccepted, wantStore int
		wantOutcome, wantReason string
	}{
		{privacy.BotFilterOff, 1, 1, outcomeAccepted, reasonAccepted},
		{privacy.BotFilterOn, 0, 0, outcomeDropped, reasonBot},
		{"", 0, 0, outcomeDropped, reasonBot}, // the server's default: on
	}
	for _, tt := range tests {
		t.Run("BOT_FILTER="+tt.setting, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.DebugFeedSize, c.BotFilter = 100, tt.setting })
			h.setupTenant("acme", "web")
			a := intake(t, h.c("POST", "/v1/events", "web", ev("web", 1, nil), "User-Agent", headlessUA))
			if a.Accepted != tt.wantAccepted || a.Dropped != 1-tt.wantAccepted {
				t.Errorf("got %+v, want %d accepted", a, tt.wantAccepted)
			}
			if got := h.count(`SELECT COUNT(*) FROM events WHERE site_id = 'web'`); got != tt.wantStore {
				t.Errorf("got %d events stored, want %d", got, tt.wantStore)
			}
			intake(t, h.c("POST", "/v1/events", "web", ev("web", 2, nil), "User-Agent", chromeUA))
			list := h.srv.Decisions(DebugFilter{})
			if len(list) != 2 {
				t.Fatalf("got %d decisions, want 2", len(list))
			}
			bot, human := list[1], list[0]
			if !bot.Bot || bot.Outcome != tt.wantOutcome || bot.Reason != tt.wantReason {
				t.Errorf("got the headless browser's decision bot=%v %s/%s, want bot=true %s/%s", bot.Bot, bot.Outcome, bot.Reason, tt.wantOutcome, tt.wantReason)
			}
			if human.Bot {
				t.Errorf("got a Chrome event marked bot, want it unmarked")
			}
		})
	}
}
