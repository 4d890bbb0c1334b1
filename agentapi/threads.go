package agentapi

// threadRoutes registers the routes of this group.
func (s *Server) threadRoutes() {}
