package storage

import (
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/tally-analytics/tally/privacy"
)

// Dimensions read from what is stored without a column of their own
// (docs/query-api.md#channels).
const (
	// ChannelDimension is a visit's acquisition channel, computed when
	// read from its source and campaign.
	ChannelDimension = "visit:channel"
	// HostnameDimension is the host of the event's page.
	HostnameDimension = "event:hostname"
)

// PageHost is the host of a page's URL as event:hostname shows it: lower
// case, without "www." or port; "" when the URL has none.
func PageHost(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
}

// shoppingSources are the shopping sites the channel rules know, as names
// and as hosts (a source the list does not name is its host).
var shoppingSources = []string{"amazon", "ebay", "walmart", "shopify", "etsy", "aliexpress", "temu", "shein",
	"zalando", "target", "bestbuy", "rakuten", "mercadolibre", "allegro", "idealo",
	"amazon.com", "amazon.co.uk", "amazon.de", "amazon.fr", "amazon.it", "amazon.es", "amazon.ca", "amazon.co.jp",
	"ebay.com", "ebay.co.uk", "ebay.de", "walmart.com", "shopify.com", "etsy.com", "aliexpress.com", "temu.com",
	"shein.com", "zalando.de", "target.com", "bestbuy.com", "idealo.de"}

// paidUTMSources are utm_source values that mark a visit as paid whatever
// its medium (ad platforms' own tags).
var paidUTMSources = []string{"adwords", "google_ads", "google-ads", "googleads", "fb-ads", "fb_ads", "fbad", "fbads",
	"facebook-ads", "facebook_ads", "facebook_ad", "ig-ads", "instagram-ads", "yt-ads", "youtube-ads", "reddit-ads",
	"twitter-ads", "x-ads", "linkedin-ads", "tiktok-ads", "bing-ads", "microsoft-ads"}

// channelSQL is visit:channel of a visit (alias s): Plausible's channel
// rules (GA4's default channel group, as Plausible applies them), first
// match wins. It reads source (the source name, or host), utm_source,
// utm_medium and utm_campaign, so a visit's channel follows its stored
// source, backfilled names included; the click ids (gclid, msclkid) that
// Plausible also reads are not stored, so a visit tagged by them alone is
// Organic Search.
var channelSQL = sync.OnceValue(func() string {
	const (
		src  = "lower(coalesce(s.source, ''))"
		usrc = "lower(coalesce(s.utm_source, ''))"
		med  = "lower(coalesce(s.utm_medium, ''))"
		camp = "lower(coalesce(s.utm_campaign, ''))"
	)
	in := func(expr string, values []string) string {
		if len(values) == 0 {
			return "(1 = 0)"
		}
		q := make([]string, len(values))
		for i, v := range values {
			q[i] = "'" + strings.ReplaceAll(strings.ToLower(v), "'", "''") + "'"
		}
		slices.Sort(q)
		return expr + " IN (" + strings.Join(slices.Compact(q), ", ") + ")"
	}
	kind := func(k string) string { return in(src, privacy.SourceNames(k)) }
	or := func(c ...string) string { return "(" + strings.Join(c, " OR ") + ")" }
	paid := or(med+" LIKE '%cp%'", med+" = 'ppc'", med+" = 'retargeting'", med+" LIKE 'paid%'", in(usrc, paidUTMSources))
	shopCampaign := or(camp+" LIKE 'shop%'", camp+" LIKE '%shopping%'", camp+" LIKE '%eshop%'", camp+" LIKE '% shop%'", camp+" LIKE '%-shop%'")
	shopping := or(in(src, shoppingSources), shopCampaign)
	emails := []string{"email", "e-mail", "e_mail", "e mail"}
	rules := [][2]string{
		{camp + " LIKE '%cross-network%'", "Cross-network"},
		{shopping + " AND " + paid, "Paid Shopping"},
		{kind(privacy.SourceSearch) + " AND " + paid, "Paid Search"},
		{kind(privacy.SourceSocial) + " AND " + paid, "Paid Social"},
		{kind(privacy.SourceVideo) + " AND " + paid, "Paid Video"},
		{in(med, []string{"display", "banner", "expandable", "interstitial", "cpm"}), "Display"},
		{paid, "Paid Other"},
		{shopping, "Organic Shopping"},
		{or(kind(privacy.SourceSocial), in(med, []string{"social", "social-network", "social-media", "sm", "social network", "social media"})), "Organic Social"},
		{or(kind(privacy.SourceVideo), med+" LIKE '%video%'"), "Organic Video"},
		{kind(privacy.SourceAI), "AI Assistants"},
		{or(kind(privacy.SourceSearch), med+" = 'organic'"), "Organic Search"},
		{in(med, []string{"referral", "app", "link"}), "Referral"},
		{or(in(src, append([]string{"gmail"}, emails...)), kind(privacy.SourceEmail), in(med, emails), src+" LIKE '%newsletter%'"), "Email"},
		{med + " = 'affiliate'", "Affiliates"},
		{med + " = 'audio'", "Audio"},
		{or(src+" = 'sms'", med+" = 'sms'"), "SMS"},
		{or(med+" LIKE '%push'", med+" LIKE '%mobile%'", med+" LIKE '%notification%'", src+" = 'firebase'"), "Mobile Push Notifications"},
		{src + " <> ''", "Referral"},
	}
	var b strings.Builder
	b.WriteString("CASE")
	for _, r := range rules {
		b.WriteString(" WHEN " + r[0] + " THEN '" + r[1] + "'")
	}
	b.WriteString(" ELSE 'Direct' END")
	return b.String()
})
