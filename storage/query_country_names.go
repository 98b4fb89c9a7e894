package storage

import (
	"regexp"
	"slices"
	"strings"
)

// visit:country_name and visit:region_name (docs/query-api.md#locations):
// the name of the stored ISO 3166-1 alpha-2 or ISO 3166-2 code, mapped on
// the way in (filters become filters on codes) and on the way out
// (answers), so the stored rows keep their codes.

// CountryNameDimension is the country's English name, as Plausible
// answers it ("Germany" for DE).
const CountryNameDimension = "visit:country_name"

// RegionNameDimension is the region's name ("Berlin" for DE-BE), from
// query_region_names.go.
const RegionNameDimension = "visit:region_name"

// codeNames is a dimension answered as the names of another's codes.
type codeNames struct {
	dim, codeDim string
	names        map[string]string
}

// namedDimensions are the dimensions read as codes, answered as names.
var namedDimensions = []codeNames{
	{CountryNameDimension, "visit:country", countryNames},
	{RegionNameDimension, "visit:region", regionNames},
}

// namedDimension is dim's table, if dim is answered as names.
func namedDimension(dim string) (codeNames, bool) {
	for _, t := range namedDimensions {
		if t.dim == dim {
			return t, true
		}
	}
	return codeNames{}, false
}

// countryNames maps each ISO 3166-1 alpha-2 code to its English short
// name: the common name where the standard's own is long ("South Korea"
// for "Korea, Republic of"), else the name. Source: the Debian iso-codes
// package 4.15.0 (iso_3166-1.json, fields name and common_name), which
// follows the ISO 3166 Maintenance Agency's list; the names are facts.
var countryNames = map[string]string{
	"AD": "Andorra",
	"AE": "United Arab Emirates",
	"AF": "Afghanistan",
	"AG": "Antigua and Barbuda",
	"AI": "Anguilla",
	"AL": "Albania",
	"AM": "Armenia",
	"AO": "Angola",
	"AQ": "Antarctica",
	"AR": "Argentina",
	"AS": "American Samoa",
	"AT": "Austria",
	"AU": "Australia",
	"AW": "Aruba",
	"AX": "Åland Islands",
	"AZ": "Azerbaijan",
	"BA": "Bosnia and Herzegovina",
	"BB": "Barbados",
	"BD": "Bangladesh",
	"BE": "Belgium",
	"BF": "Burkina Faso",
	"BG": "Bulgaria",
	"BH": "Bahrain",
	"BI": "Burundi",
	"BJ": "Benin",
	"BL": "Saint Barthélemy",
	"BM": "Bermuda",
	"BN": "Brunei Darussalam",
	"BO": "Bolivia",
	"BQ": "Bonaire, Sint Eustatius and Saba",
	"BR": "Brazil",
	"BS": "Bahamas",
	"BT": "Bhutan",
	"BV": "Bouvet Island",
	"BW": "Botswana",
	"BY": "Belarus",
	"BZ": "Belize",
	"CA": "Canada",
	"CC": "Cocos (Keeling) Islands",
	"CD": "Congo, The Democratic Republic of the",
	"CF": "Central African Republic",
	"CG": "Congo",
	"CH": "Switzerland",
	"CI": "Côte d'Ivoire",
	"CK": "Cook Islands",
	"CL": "Chile",
	"CM": "Cameroon",
	"CN": "China",
	"CO": "Colombia",
	"CR": "Costa Rica",
	"CU": "Cuba",
	"CV": "Cabo Verde",
	"CW": "Curaçao",
	"CX": "Christmas Island",
	"CY": "Cyprus",
	"CZ": "Czechia",
	"DE": "Germany",
	"DJ": "Djibouti",
	"DK": "Denmark",
	"DM": "Dominica",
	"DO": "Dominican Republic",
	"DZ": "Algeria",
	"EC": "Ecuador",
	"EE": "Estonia",
	"EG": "Egypt",
	"EH": "Western Sahara",
	"ER": "Eritrea",
	"ES": "Spain",
	"ET": "Ethiopia",
	"FI": "Finland",
	"FJ": "Fiji",
	"FK": "Falkland Islands (Malvinas)",
	"FM": "Micronesia, Federated States of",
	"FO": "Faroe Islands",
	"FR": "France",
	"GA": "Gabon",
	"GB": "United Kingdom",
	"GD": "Grenada",
	"GE": "Georgia",
	"GF": "French Guiana",
	"GG": "Guernsey",
	"GH": "Ghana",
	"GI": "Gibraltar",
	"GL": "Greenland",
	"GM": "Gambia",
	"GN": "Guinea",
	"GP": "Guadeloupe",
	"GQ": "Equatorial Guinea",
	"GR": "Greece",
	"GS": "South Georgia and the South Sandwich Islands",
	"GT": "Guatemala",
	"GU": "Guam",
	"GW": "Guinea-Bissau",
	"GY": "Guyana",
	"HK": "Hong Kong",
	"HM": "Heard Island and McDonald Islands",
	"HN": "Honduras",
	"HR": "Croatia",
	"HT": "Haiti",
	"HU": "Hungary",
	"ID": "Indonesia",
	"IE": "Ireland",
	"IL": "Israel",
	"IM": "Isle of Man",
	"IN": "India",
	"IO": "British Indian Ocean Territory",
	"IQ": "Iraq",
	"IR": "Iran",
	"IS": "Iceland",
	"IT": "Italy",
	"JE": "Jersey",
	"JM": "Jamaica",
	"JO": "Jordan",
	"JP": "Japan",
	"KE": "Kenya",
	"KG": "Kyrgyzstan",
	"KH": "Cambodia",
	"KI": "Kiribati",
	"KM": "Comoros",
	"KN": "Saint Kitts and Nevis",
	"KP": "North Korea",
	"KR": "South Korea",
	"KW": "Kuwait",
	"KY": "Cayman Islands",
	"KZ": "Kazakhstan",
	"LA": "Laos",
	"LB": "Lebanon",
	"LC": "Saint Lucia",
	"LI": "Liechtenstein",
	"LK": "Sri Lanka",
	"LR": "Liberia",
	"LS": "Lesotho",
	"LT": "Lithuania",
	"LU": "Luxembourg",
	"LV": "Latvia",
	"LY": "Libya",
	"MA": "Morocco",
	"MC": "Monaco",
	"MD": "Moldova",
	"ME": "Montenegro",
	"MF": "Saint Martin (French part)",
	"MG": "Madagascar",
	"MH": "Marshall Islands",
	"MK": "North Macedonia",
	"ML": "Mali",
	"MM": "Myanmar",
	"MN": "Mongolia",
	"MO": "Macao",
	"MP": "Northern Mariana Islands",
	"MQ": "Martinique",
	"MR": "Mauritania",
	"MS": "Montserrat",
	"MT": "Malta",
	"MU": "Mauritius",
	"MV": "Maldives",
	"MW": "Malawi",
	"MX": "Mexico",
	"MY": "Malaysia",
	"MZ": "Mozambique",
	"NA": "Namibia",
	"NC": "New Caledonia",
	"NE": "Niger",
	"NF": "Norfolk Island",
	"NG": "Nigeria",
	"NI": "Nicaragua",
	"NL": "Netherlands",
	"NO": "Norway",
	"NP": "Nepal",
	"NR": "Nauru",
	"NU": "Niue",
	"NZ": "New Zealand",
	"OM": "Oman",
	"PA": "Panama",
	"PE": "Peru",
	"PF": "French Polynesia",
	"PG": "Papua New Guinea",
	"PH": "Philippines",
	"PK": "Pakistan",
	"PL": "Poland",
	"PM": "Saint Pierre and Miquelon",
	"PN": "Pitcairn",
	"PR": "Puerto Rico",
	"PS": "Palestine, State of",
	"PT": "Portugal",
	"PW": "Palau",
	"PY": "Paraguay",
	"QA": "Qatar",
	"RE": "Réunion",
	"RO": "Romania",
	"RS": "Serbia",
	"RU": "Russian Federation",
	"RW": "Rwanda",
	"SA": "Saudi Arabia",
	"SB": "Solomon Islands",
	"SC": "Seychelles",
	"SD": "Sudan",
	"SE": "Sweden",
	"SG": "Singapore",
	"SH": "Saint Helena, Ascension and Tristan da Cunha",
	"SI": "Slovenia",
	"SJ": "Svalbard and Jan Mayen",
	"SK": "Slovakia",
	"SL": "Sierra Leone",
	"SM": "San Marino",
	"SN": "Senegal",
	"SO": "Somalia",
	"SR": "Suriname",
	"SS": "South Sudan",
	"ST": "Sao Tome and Principe",
	"SV": "El Salvador",
	"SX": "Sint Maarten (Dutch part)",
	"SY": "Syria",
	"SZ": "Eswatini",
	"TC": "Turks and Caicos Islands",
	"TD": "Chad",
	"TF": "French Southern Territories",
	"TG": "Togo",
	"TH": "Thailand",
	"TJ": "Tajikistan",
	"TK": "Tokelau",
	"TL": "Timor-Leste",
	"TM": "Turkmenistan",
	"TN": "Tunisia",
	"TO": "Tonga",
	"TR": "Türkiye",
	"TT": "Trinidad and Tobago",
	"TV": "Tuvalu",
	"TW": "Taiwan",
	"TZ": "Tanzania",
	"UA": "Ukraine",
	"UG": "Uganda",
	"UM": "United States Minor Outlying Islands",
	"US": "United States",
	"UY": "Uruguay",
	"UZ": "Uzbekistan",
	"VA": "Holy See (Vatican City State)",
	"VC": "Saint Vincent and the Grenadines",
	"VE": "Venezuela",
	"VG": "Virgin Islands, British",
	"VI": "Virgin Islands, U.S.",
	"VN": "Vietnam",
	"VU": "Vanuatu",
	"WF": "Wallis and Futuna",
	"WS": "Samoa",
	"YE": "Yemen",
	"YT": "Mayotte",
	"ZA": "South Africa",
	"ZM": "Zambia",
	"ZW": "Zimbabwe",
}

// CountryName is the answer for a stored country: its English name, or,
// for a value the table lacks ((not set), a CDN's XX or T1), the value
// itself, so that no two stored values share an answer.
func CountryName(code string) string { return codeNames{names: countryNames}.name(code) }

// name is the answer for a stored code: its name, or, for a value the
// table lacks ((not set), a CDN's XX or T1, a code newer than the table),
// the value itself, so that no two stored values share an answer.
func (t codeNames) name(code string) string {
	if name, ok := t.names[code]; ok {
		return name
	}
	return code
}

// filter turns a filter on t's names into one on its codes: is and is_not
// with the codes whose names the values match (by the operator, folded if
// asked). A value that names nothing stands for itself, as name answers
// it, so an is filter on an answered value finds its rows and one on an
// unknown name finds none.
func (t codeNames) filter(f QueryFilter) QueryFilter {
	base, negated := strings.CutSuffix(f.Op, "_not")
	var patterns []*regexp.Regexp
	if base == "matches" {
		for _, v := range f.Values {
			// CheckPattern has accepted each already.
			if re, err := regexp.Compile(v); err == nil {
				patterns = append(patterns, re)
			}
		}
	}
	fold := func(s string) string {
		if f.Fold {
			return strings.ToLower(s)
		}
		return s
	}
	match := func(name string) bool {
		for i, v := range f.Values {
			switch base {
			case "is":
				if fold(name) == fold(v) {
					return true
				}
			case "contains":
				if strings.Contains(fold(name), fold(v)) {
					return true
				}
			case "matches":
				if i < len(patterns) && patterns[i].MatchString(name) {
					return true
				}
			}
		}
		return false
	}
	var codes []string
	names := map[string]bool{}
	for code, name := range t.names {
		names[name] = true
		if match(name) {
			codes = append(codes, code)
		}
	}
	slices.Sort(codes)
	if base == "is" || len(codes) == 0 {
		for _, v := range f.Values {
			if _, named := t.names[v]; !named && !slices.Contains(codes, v) && !names[v] {
				codes = append(codes, v)
			}
		}
	}
	if len(codes) == 0 {
		// No value at all ("is" of []): no stored value is "".
		codes = []string{""}
	}
	op := "is"
	if negated {
		op = "is_not"
	}
	return QueryFilter{Op: op, Dim: t.codeDim, Values: codes}
}

// nameCodes replaces, in rows read for pq, each value of a named
// dimension (read as its code) by its name.
func (pq *parsedQuery) nameCodes(rows []StatsRow) {
	for at, dim := range pq.dimensions {
		t, ok := namedDimension(dim)
		if !ok {
			continue
		}
		for i := range rows {
			rows[i].Dims[at] = t.name(rows[i].Dims[at])
		}
	}
}

// storedDimensions is pq's dimensions as the tables hold them: a named
// dimension read as its codes'.
func (pq *parsedQuery) storedDimensions() []string {
	dims := pq.dimensions
	cloned := false
	for at, dim := range pq.dimensions {
		if t, ok := namedDimension(dim); ok {
			if !cloned {
				dims, cloned = slices.Clone(pq.dimensions), true
			}
			dims[at] = t.codeDim
		}
	}
	return dims
}
