package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/chaos/check"
)

// The exec command resumes from the checkpoint file's tag and count, and
// each ::checkpoint line is a Step that follows the one before: what the
// thread checks read to tell where an attempt started.
func TestExecCommandResumesAndChainsSteps(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "checkpoint.json")
	prev := check.Step{Tag: check.MakeTag("r0", "tool", 1, 3), Token: "r0/tool@1/c1", From: "x", I: 7}
	require.NoError(t, os.WriteFile(file, []byte(`{"tag":"`+prev.Tag+`","token":"r0/tool@1/c1","from":"x","i":7}`), 0o600))
	for name, env := range map[string][]string{
		"resumed": {"BATON_CHECKPOINT_FILE=" + file},
		"fresh":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			argv := ExecCommand(Input{NS: "tool", Steps: 3, StepMS: 1})
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append([]string{"BATON_RUN_ID=r1", "BATON_NODE_ID=tool", "BATON_EPOCH=2",
				"BATON_FENCING_TOKEN=r1/tool@2/c2"}, env...)
			out, err := cmd.Output()
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			require.Len(t, lines, 4)
			from, i := "", int64(0)
			if name == "resumed" {
				from, i = prev.Tag, prev.I
			}
			for seq, l := range lines[:3] {
				data, ok := strings.CutPrefix(l, "::checkpoint ")
				require.True(t, ok, l)
				st, ok := check.ParseStep([]byte(data))
				require.True(t, ok, data)
				i++
				require.Equal(t, check.Step{Tag: check.MakeTag("r1", "tool", 2, int64(seq+1)), Token: "r1/tool@2/c2",
					From: from, I: i}, st)
				from = st.Tag
			}
			require.JSONEq(t, `{"ns":"tool","i":`+strconv.FormatInt(i, 10)+`,"last":"`+from+`"}`, lines[3])
		})
	}
}
