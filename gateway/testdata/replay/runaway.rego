# A candidate's rule that grows without bound (issue 21): every authz
# decision doubles a 1 KiB string 25 times with concat, which asks for
# 32 GiB for its last string alone. A reviewer's 3 KB bundle with 20
# doublings took a gateway from 76 MB to 4.3 GB in 12 s. The gateway tests
# add this file to a copy of the embedded bundle and replay it: its worker
# must end at its memory limit, and the gateway must not grow.
package sandgate.authz

import future.keywords.not

# METADATA
# title: Runaway concat
# description: Doubles a string 25 times on every request; never fires.
# custom:
#   id: RUNAWAY
#   severity: low
violations contains {"rule": "RUNAWAY", "msg": "the string was negative in length"} if {
	s0 := sprintf("%01024d", [count(input.request.method)])
	s1 := concat("", [s0, s0])
	s2 := concat("", [s1, s1])
	s3 := concat("", [s2, s2])
	s4 := concat("", [s3, s3])
	s5 := concat("", [s4, s4])
	s6 := concat("", [s5, s5])
	s7 := concat("", [s6, s6])
	s8 := concat("", [s7, s7])
	s9 := concat("", [s8, s8])
	s10 := concat("", [s9, s9])
	s11 := concat("", [s10, s10])
	s12 := concat("", [s11, s11])
	s13 := concat("", [s12, s12])
	s14 := concat("", [s13, s13])
	s15 := concat("", [s14, s14])
	s16 := concat("", [s15, s15])
	s17 := concat("", [s16, s16])
	s18 := concat("", [s17, s17])
	s19 := concat("", [s18, s18])
	s20 := concat("", [s19, s19])
	s21 := concat("", [s20, s20])
	s22 := concat("", [s21, s21])
	s23 := concat("", [s22, s22])
	s24 := concat("", [s23, s23])
	s25 := concat("", [s24, s24])
	count(s25) < 0
}
