// Package browser tests sandgate's operator dashboard in a real browser:
// headless Chromium (Debian's chromium) driven over the DevTools protocol by
// chromedp, against `sandgate dev` on the built-in Nomad simulator. The
// tests skip, saying what is missing, when no Chromium is installed.
//
// Run them with `go test ./test/browser/ -v`; on a failure they save a
// screenshot and the page's console log into the test's temp dir and log
// both paths.
package browser
