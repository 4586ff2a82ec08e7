package sandgate.lib.modes_test

import data.sandgate.lib.modes
import future.keywords.not

vs := {
	{"rule": "E3", "msg": "logs: stream must be stdout or stderr"},
	{"rule": "H1", "msg": "privileged"},
	{"rule": "INPUT", "msg": "now is missing"},
	{"rule": "T1", "msg": "session token has no sandbox_id"},
}

test_every_rule_is_deny_by_default if {
	d := modes.decision(vs) with data.sandgate.config.enforcement as {}
	d.allow == false
	d.violations == vs
	d.warnings == set()
	d.dryrun == set()
}

test_a_missing_enforcement_is_deny if {
	modes.mode("E3") == "deny" with data.sandgate.config as {}
}

test_warn_allows_and_reports if {
	d := modes.decision({v | some v in vs; v.rule == "E3"}) with data.sandgate.config.enforcement as {"E3": "warn"}
	d.allow == true
	d.violations == set()
	d.warnings == {{"rule": "E3", "msg": "logs: stream must be stdout or stderr"}}
}

test_dryrun_allows_and_only_logs if {
	d := modes.decision({v | some v in vs; v.rule == "H1"}) with data.sandgate.config.enforcement as {"H1": "dryrun"}
	d.allow == true
	d.dryrun == {{"rule": "H1", "msg": "privileged"}}
	d.warnings == set()
}

test_a_soft_rule_does_not_free_a_deny_one if {
	d := modes.decision(vs) with data.sandgate.config.enforcement as {"E3": "warn", "H1": "dryrun"}
	d.allow == false
	{v.rule | some v in d.violations} == {"INPUT", "T1"}
}

test_input_and_t1_are_deny_whatever_the_data_says if {
	every id in ["INPUT", "T1"] {
		modes.mode(id) == "deny" with data.sandgate.config.enforcement as {"INPUT": "warn", "T1": "dryrun"}
	}
}

test_an_unknown_or_mistyped_mode_is_deny if {
	every m in ["allow", "off", "", true, 1, null, ["warn"]] {
		modes.mode("E3") == "deny" with data.sandgate.config.enforcement as {"E3": m}
	}
}
