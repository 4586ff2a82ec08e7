package main

import (
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Help rendering. pflag 1.1 writes every boolean flag as
// "--stream[=true|false]" in usage, which reads as if the flag took a value
// (it does not: --stream alone is true, --stream=false is accepted but
// nobody types it). The usage template renders flags through flagUsages,
// which lists a boolean as "--stream", the way Go's flag package and
// every earlier pflag did; every other flag is rendered as pflag renders
// it.

// setUsageTemplate makes root and every command under it render its flags
// through flagUsages.
func setUsageTemplate(root *cobra.Command) {
	addTemplateFuncs()
	t := root.UsageTemplate()
	for _, set := range []string{"LocalFlags", "InheritedFlags"} {
		t = strings.ReplaceAll(t, "{{."+set+".FlagUsages |", "{{flagUsages ."+set+" |")
	}
	root.SetUsageTemplate(t)
}

// flagUsages is fs.FlagUsages with boolean flags shown without
// "[=true|false]": it renders a copy of fs whose boolean values no longer
// say they are booleans to pflag's usage writer (their type still reads
// "bool", so no value name is shown either, and a default of true still
// reads "(default true)").
func flagUsages(fs *pflag.FlagSet) string {
	shown := pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
	shown.SortFlags = fs.SortFlags
	fs.VisitAll(func(f *pflag.Flag) {
		c := *f
		if bv, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bv.IsBoolFlag() {
			c.Value = plainBool{f.Value}
			if c.NoOptDefVal == "true" {
				c.NoOptDefVal = ""
			}
		}
		shown.AddFlag(&c)
	})
	return shown.FlagUsages()
}

// plainBool hides a boolean value's IsBoolFlag from the usage writer.
type plainBool struct{ v pflag.Value }

func (b plainBool) String() string     { return b.v.String() }
func (b plainBool) Set(s string) error { return b.v.Set(s) }
func (b plainBool) Type() string       { return b.v.Type() }

// addTemplateFuncs registers the template functions once: cobra keeps them
// in a package map, and tests build root commands in parallel.
var addTemplateFuncs = sync.OnceFunc(func() {
	cobra.AddTemplateFunc("flagUsages", flagUsages)
	cobra.AddTemplateFunc("versionText", versionText)
})
