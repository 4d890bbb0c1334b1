package fence

// UnpackForTest reads the run hash and node hashes of a run packed into
// one key (lib/pack.lua), for the tests of package fence_test that check
// what a packed run holds.
func UnpackForTest(b []byte) (map[string]string, []map[string]string, error) {
	p, err := unpackRun(b)
	if err != nil {
		return nil, nil, err
	}
	return p.Run, p.Nodes, nil
}
