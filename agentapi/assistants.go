package agentapi

// assistantRoutes registers the routes of this group.
func (s *Server) assistantRoutes() {}
