package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/batonrun/baton/fence"
)

// The limit command registers itself here so that the command table in
// usage.go stays as it was.
func init() {
	commands["limit"] = command{args: "set NAME [--concurrency N] [--rate N/PERIOD] [--burst B] | list [--json] | delete NAME",
		run:   (*app).limit,
		short: "set, list and delete fleet-wide limits (concurrency, rate)",
		help: "Set a fleet-wide limit that nodes name in their spec (\"limits\": [\"openai\"]):\n" +
			"at most --concurrency nodes under it run at once, and its claims take at most\n" +
			"--rate N/PERIOD (20/s, 600/m, 90000/1m), --burst more at once. NAME ending\n" +
			"in :* (tenant:*) is a prefix rule: every key it covers (tenant:acme) gets\n" +
			"that limit of its own. A change holds from the next claim on, with no\n" +
			"restart. list shows each limit with what is in use and waiting now.\n" +
			"A limit of 0 or below, or a malformed rate, is exit 2 and changes nothing.",
		flags: "  --concurrency N  nodes running at once under each key (set)\n" +
			"  --rate N/PERIOD  claims (or units of cost) per period (set)\n" +
			"  --burst B        claims allowed at once beyond the rate (set; default 0)\n" +
			"  --json           print a JSON array (list)\n"}
	commandOrder = append(commandOrder, "limit")
}

func (a *app) limit(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("missing set, list or delete")
	}
	switch args[0] {
	case "set":
		return a.limitSet(ctx, args[1:])
	case "list", "ls":
		return a.limitList(ctx, args[1:])
	case "delete", "rm":
		return a.limitDelete(ctx, args[1:])
	case "-h", "-help", "--help":
		return &usageError{help: true}
	}
	return usagef("unknown limit command %q (want set, list or delete)", args[0])
}

func (a *app) limitSet(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("limit set", flag.ContinueOnError)
	conc := fs.String("concurrency", "", "")
	rate := fs.String("rate", "", "")
	burst := fs.String("burst", "", "")
	name, err := oneArg(fs, args, "NAME")
	if err != nil {
		return err
	}
	l := fence.Limit{Name: name}
	if *conc == "" && *rate == "" {
		return usagef("set --concurrency N, --rate N/PERIOD or both")
	}
	if *conc != "" {
		n, err := strconv.Atoi(*conc)
		if err != nil || n <= 0 {
			return badInput(fmt.Errorf("--concurrency: %q, want a whole number of 1 or more (delete the limit to lift it)", *conc))
		}
		l.Concurrency = n
	}
	if *rate != "" {
		if l.Rate, l.Period, err = fence.ParseRate(*rate); err != nil {
			return badInput(fmt.Errorf("--%w", err))
		}
	}
	if *burst != "" {
		n, err := strconv.Atoi(*burst)
		if err != nil || n < 0 {
			return badInput(fmt.Errorf("--burst: %q, want a whole number of 0 or more", *burst))
		}
		l.Burst = n
	}
	if err := l.Validate(); err != nil {
		return badInput(err)
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := cl.SetLimit(ctx, l); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "limit %s set: %s\n", l.Name, describeLimit(l))
	return err
}

// describeLimit words a limit: "concurrency 3, rate 20/s, burst 5".
func describeLimit(l fence.Limit) string {
	s := ""
	if l.Concurrency > 0 {
		s = "concurrency " + strconv.Itoa(l.Concurrency)
	}
	if l.Rate > 0 {
		if s != "" {
			s += ", "
		}
		s += "rate " + l.RateString()
		if l.Burst > 0 {
			s += ", burst " + strconv.Itoa(l.Burst)
		}
	}
	return s
}

func (a *app) limitDelete(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("limit delete", flag.ContinueOnError)
	name, err := oneArg(fs, args, "NAME")
	if err != nil {
		return err
	}
	if err := fence.ValidateLimitName("NAME", name); err != nil {
		return badInput(err)
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	found, err := cl.DeleteLimit(ctx, name)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("no limit %s is set", name)
	}
	_, err = fmt.Fprintf(a.stdout, "limit %s deleted\n", name)
	return err
}

func (a *app) limitList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("limit list", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	list, err := cl.Store().LimitStates(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, list)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LIMIT\tCONCURRENCY\tRATE\tBURST\tKEY\tIN USE\tWAITING\tTOKENS")
	for _, l := range list {
		c, r, b := "-", "-", "-"
		if l.Concurrency > 0 {
			c = strconv.Itoa(l.Concurrency)
		}
		if l.Rate > 0 {
			r, b = l.RateString(), strconv.Itoa(l.Burst)
		}
		if len(l.Keys) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t-\n", l.Name, c, r, b)
		}
		for _, k := range l.Keys {
			tok := "-"
			if k.Tokens != nil {
				tok = strconv.FormatInt(*k.Tokens, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", l.Name, c, r, b, k.Key, k.InUse, k.Waiting, tok)
		}
	}
	return tw.Flush()
}
